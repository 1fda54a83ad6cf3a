#!/usr/bin/env python
"""What a routing token cap (``max_prompt_tokens`` in the serve config) costs in accuracy and saves in CPU.

For a trained P2L model and a file of real prompts, runs the model as ``evalprism serve`` does
(OpenVINO runtime, batches of 16 in arrival order) uncapped and at each cap, and prints, per cap:
the share of prompts that keep the same best model, the largest and 99th-percentile change of any
coefficient, the share of prompts the cap cuts, and the encoder's CPU per prompt. The gate a cap
must pass to be a default: the same best model on at least 99% of prompts and every coefficient
within 0.05 of the uncapped model's.

    python scripts/serve_token_cap.py MODEL_DIR PROMPTS.jsonl [--caps 32,64,128] [--limit 3000]

``PROMPTS``: any battles or prompts file evalprism reads with a ``prompt`` column (JSON lines or CSV).
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import numpy as np
import pandas as pd

from evalprism.p2l.model import P2LModel

GATE_SAME_BEST = 0.99
GATE_MAX_COEF_CHANGE = 0.05


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def serve_like(model: P2LModel, prompts: list[str]) -> tuple[np.ndarray, float]:
    """Coefficients of every prompt in serving-sized batches, and the CPU ms per prompt."""
    start = cpu_seconds()
    coefs = np.concatenate([model.leaderboards(prompts[i : i + 16]) for i in range(0, len(prompts), 16)])
    return coefs, (cpu_seconds() - start) / len(prompts) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir")
    parser.add_argument("prompts")
    parser.add_argument("--caps", default="32,64,128")
    parser.add_argument("--limit", type=int, default=3000, help="distinct prompts used (a seeded sample)")
    args = parser.parse_args()
    frame = pd.read_json(args.prompts, lines=True) if args.prompts.endswith("l") else pd.read_csv(args.prompts)
    distinct = frame["prompt"].astype(str).drop_duplicates()
    prompts = distinct.sample(min(args.limit, len(distinct)), random_state=0).tolist()
    base = P2LModel.load(args.model_dir, cache_dir=False, runtime="openvino")
    tokens = base.backbone.encoder.preprocess(prompts)["attention_mask"].sum(axis=1).numpy()
    reference, reference_cpu = serve_like(base, prompts)
    rows = [
        {
            "cap": "none",
            "prompts_cut": 0.0,
            "same_best_model": 1.0,
            "max_coef_change": 0.0,
            "p99_coef_change": 0.0,
            "cpu_ms_per_prompt": reference_cpu,
        }
    ]
    for cap in (int(c) for c in args.caps.split(",")):
        model = P2LModel.load(args.model_dir, cache_dir=False, runtime="openvino")
        model.backbone.limit_prompt_tokens(cap)
        coefs, cpu = serve_like(model, prompts)
        change = np.abs(coefs - reference).max(axis=1)
        rows.append(
            {
                "cap": cap,
                "prompts_cut": float((tokens > cap).mean()),
                "same_best_model": float((coefs.argmax(1) == reference.argmax(1)).mean()),
                "max_coef_change": float(change.max()),
                "p99_coef_change": float(np.quantile(change, 0.99)),
                "cpu_ms_per_prompt": cpu,
            }
        )
    table = pd.DataFrame(rows)
    table["passes_gate"] = (table["same_best_model"] >= GATE_SAME_BEST) & (
        table["max_coef_change"] <= GATE_MAX_COEF_CHANGE
    )
    print(
        f"{len(prompts)} distinct prompts from {args.prompts}; tokens: median {np.median(tokens):.0f}, "
        f"90th percentile {np.quantile(tokens, 0.9):.0f}, max {tokens.max()}"
    )
    print(table.to_string(index=False, float_format=lambda v: f"{v:.4f}"))
    print(f"load average {Path('/proc/loadavg').read_text().split()[:3]} at {time.strftime('%H:%M:%S')}")


if __name__ == "__main__":
    main()
