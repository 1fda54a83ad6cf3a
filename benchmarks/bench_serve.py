"""Load benchmark of the P2L router service (`evalprism serve`), loopback only, bounded.

What runs, in one process tree on this machine:

* a P2L model with the default backbone (frozen minilm), trained on simulated battles (seconds);
* the small OpenAI-compatible upstream of ``tests/serve_harness.py`` standing in for the paid APIs;
* ``evalprism serve`` twice, as a subprocess each: with micro-batching (the default config) and
  with batching off (``max_batch: 1``: one P2L call per request, the peer);
* a closed-loop load generator (httpx, asyncio): ``--clients`` concurrent clients sending
  ``--routes`` ``POST /v1/route`` requests with distinct prompts, then ``--chats`` chat completions
  through the router (non-streaming and streaming alternately).

Reported: throughput, p50 / p99 latency of ``/v1/route`` seen by the clients, batching's gain
(throughput ratio and p99 ratio against batching off), errors (target 0) and whether the decision
log holds exactly one line per request. Target on 2 cores with the default backbone: p99 of
``/v1/route`` <= 100 ms at 32 concurrent clients. The load generator shares the 2 cores with the
service, as a co-located client would; the table footer prints the load average.

Run ``python benchmarks/bench_serve.py`` (about a minute) or ``--quick``. Always exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
from _table import Report, Row, fmt_x, load_note, log, print_table, status

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from serve_harness import FakeUpstreams, ServiceProcess, write_config  # noqa: E402

TARGET_P99_MS = 100.0
TARGET_CLIENTS = 32
COSTS = {"poet-7b": 0.2, "calc-13b": 0.4, "coder-34b": 1.0, "generalist-70b": 3.0}
_SUBJECTS = ["a sonnet about the autumn sea", "the integral of x squared times sine x", "a Python function that merges "
             "two sorted lists", "the causes of the French revolution", "a haiku about debugging at night",
             "the probability of two sixes in three dice rolls", "a SQL query for the top customers by revenue",
             "a short story about a lighthouse keeper"]
_ASKS = ["Please write", "Can you explain", "I need help with", "Give me", "Walk me through"]
_DETAILS = ["Keep it under two hundred words.", "Show every step.", "Use plain language for a beginner.",
            "Add one example at the end.", "Mention the most common mistake.", ""]


def prompts(n: int, seed: int) -> list[str]:
    """``n`` distinct prompts of 10 to 40 words across the simulated topics (numbered, so that no
    cache anywhere could answer a repeat)."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        parts = [_ASKS[rng.integers(len(_ASKS))], _SUBJECTS[rng.integers(len(_SUBJECTS))] + ".",
                 *(_DETAILS[i] for i in rng.choice(len(_DETAILS), size=rng.integers(1, 4), replace=False))]
        out.append(" ".join(p for p in parts if p) + f" (request {k})")
    return out


@dataclass
class LoadResult:
    seconds: float
    latencies_ms: np.ndarray
    errors: int

    @property
    def throughput(self) -> float:
        return self.latencies_ms.size / self.seconds

    def percentile(self, q: float) -> float:
        return float(np.percentile(self.latencies_ms, q))


async def closed_loop(url: str, path: str, bodies: list[dict], clients: int) -> LoadResult:
    """``clients`` workers, each sending its next request as soon as its last one is answered."""
    queue = list(reversed(bodies))
    latencies: list[float] = []
    errors = 0
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal errors
        while queue:
            body = queue.pop()
            start = time.perf_counter()
            try:
                if body.get("stream"):
                    async with client.stream("POST", path, json=body) as response:
                        async for _ in response.aiter_lines():
                            pass
                else:
                    response = await client.post(path, json=body)
                ok = response.status_code == 200
            except httpx.HTTPError:
                ok = False
            latencies.append((time.perf_counter() - start) * 1e3)
            errors += not ok

    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
        start = time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(clients)))
        seconds = time.perf_counter() - start
    return LoadResult(seconds, np.array(latencies), errors)


def train_model(root: Path) -> Path:
    from evalprism.p2l import TrainOptions, train_p2l
    from evalprism.p2l.simulate import simulate_topic_battles

    trained = train_p2l(simulate_topic_battles(3000, seed=0), TrainOptions(seed=0), cache_dir=str(root / "cache"),
                        progress=False)
    return trained.save(root / "model")


def run_service(model_dir: Path, root: Path, upstreams: FakeUpstreams, name: str, args: argparse.Namespace,
                **config: object) -> dict:
    """Start one service, warm it up, put the load on it, stop it; its numbers and log count."""
    config_path = write_config(root / f"{name}.yaml", upstreams, COSTS, budget=1.0, decision_log=f"{name}.jsonl",
                               **config)
    service = ServiceProcess(model_dir, config_path, {"FAKE_UPSTREAM_KEY": "bench"}).start()
    try:
        warm = [{"messages": [{"role": "user", "content": p}]} for p in prompts(64, seed=99)]
        asyncio.run(closed_loop(service.url, "/v1/route", warm, args.clients))
        log(f"{name}: {args.routes} route requests at {args.clients} clients")
        route_bodies = [{"messages": [{"role": "user", "content": p}]} for p in prompts(args.routes, seed=1)]
        routes = asyncio.run(closed_loop(service.url, "/v1/route", route_bodies, args.clients))
        health = httpx.get(service.url + "/health").json()
        chats = None
        if args.chats:
            log(f"{name}: {args.chats} chat completions through the router")
            chat_bodies = [{"messages": [{"role": "user", "content": p}], "stream": k % 2 == 1}
                           for k, p in enumerate(prompts(args.chats, seed=2))]
            chats = asyncio.run(closed_loop(service.url, "/v1/chat/completions", chat_bodies, args.clients))
    finally:
        service.stop()
    lines = (root / f"{name}.jsonl").read_text().splitlines()
    expected = len(warm) + args.routes + args.chats
    valid = sum(1 for line in lines if json.loads(line).get("prompt_sha256"))
    return {"routes": routes, "chats": chats, "health": health, "log_lines": len(lines), "log_valid": valid,
            "expected": expected}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--routes", type=int, default=2000)
    parser.add_argument("--chats", type=int, default=500)
    parser.add_argument("--clients", type=int, default=TARGET_CLIENTS)
    parser.add_argument("--quick", action="store_true", help="300 routes, 60 chats")
    args = parser.parse_args()
    if args.quick:
        args.routes, args.chats = 300, 60
    load_before = os.getloadavg()
    import torch

    print(f"python {platform.python_version()}, torch {torch.__version__} ({torch.get_num_threads()} threads), "
          f"cores {os.cpu_count()}, clients {args.clients}, routes {args.routes}, chats {args.chats}")
    report = Report()
    with tempfile.TemporaryDirectory(prefix="evalprism-bench-serve-") as tmp, FakeUpstreams() as upstreams:
        root = Path(tmp)
        log("training a P2L model (frozen minilm, simulated battles)")
        model_dir = train_model(root)
        batched = run_service(model_dir, root, upstreams, "batched", args)
        single = run_service(model_dir, root, upstreams, "one_at_a_time", args, max_batch=1, batch_window_ms=0)

    b, s = batched["routes"], single["routes"]
    report.section(f"POST /v1/route, {args.routes:,} requests, {args.clients} concurrent clients")
    on_target = args.clients == TARGET_CLIENTS and args.routes >= 2000
    report.add(Row(what="p99 latency", ours=f"{b.percentile(99):.1f} ms", peer=f"{s.percentile(99):.1f} ms",
                   ratio=fmt_x(s.percentile(99) / b.percentile(99)),
                   target=f"<= {TARGET_P99_MS:.0f} ms at {TARGET_CLIENTS} clients",
                   status=status(b.percentile(99) <= TARGET_P99_MS if on_target else None)))
    report.add(Row(what="p50 latency", ours=f"{b.percentile(50):.1f} ms", peer=f"{s.percentile(50):.1f} ms",
                   ratio=fmt_x(s.percentile(50) / b.percentile(50))))
    report.add(Row(what="throughput", ours=f"{b.throughput:,.0f} req/s", peer=f"{s.throughput:,.0f} req/s",
                   ratio=fmt_x(b.throughput / s.throughput),
                   quality=f"mean P2L batch {batched['health']['prompts'] / max(batched['health']['batches'], 1):.1f} "
                           f"prompts vs {single['health']['prompts'] / max(single['health']['batches'], 1):.1f}"))
    report.add(Row(what="errors", ours=str(b.errors), peer=str(s.errors), target="0", status=status(b.errors == 0)))
    if batched["chats"] is not None:
        c, cs = batched["chats"], single["chats"]
        report.section(f"POST /v1/chat/completions through the router, {args.chats:,} requests (half streaming)")
        report.add(Row(what="p50 / p99 latency", ours=f"{c.percentile(50):.1f} / {c.percentile(99):.1f} ms",
                       peer=f"{cs.percentile(50):.1f} / {cs.percentile(99):.1f} ms"))
        report.add(Row(what="throughput", ours=f"{c.throughput:,.0f} req/s", peer=f"{cs.throughput:,.0f} req/s",
                       ratio=fmt_x(c.throughput / cs.throughput)))
        report.add(Row(what="errors", ours=str(c.errors), peer=str(cs.errors), target="0", status=status(c.errors == 0)))
    report.section("Decision log")
    for name, run in (("batched", batched), ("one at a time", single)):
        exact = run["log_lines"] == run["expected"] == run["log_valid"]
        report.add(Row(what=f"lines ({name})", ours=f"{run['log_lines']:,}", quality=f"{run['expected']:,} requests "
                       "(incl. 64 warm-up routes)", target="one per request", status=status(exact)))
    report.notes.append("peer = the same service with batching off (max_batch: 1): one P2L forward pass per request. "
                        "Latencies are measured by the clients, end to end over HTTP; the load generator runs on "
                        "the same cores as the service.")
    report.notes.append(load_note(load_before))
    print_table(report, "evalprism router service under load", quality="notes", with_n=False,
                footer="speedup = one-at-a-time / batched for latencies, batched / one-at-a-time for throughput.")


if __name__ == "__main__":
    main()
