"""What a release decision reads from a comparison: the gate of each run against the baseline
(:mod:`evalprism.stats.gate`), the runs tied for best (:mod:`evalprism.stats.confidence_set`), and
what a CI system reads (an exit code, JUnit XML, one annotation line per run).
"""

from __future__ import annotations

from collections.abc import Sequence
from xml.etree import ElementTree

import numpy as np
import pandas as pd

from evalprism.compare.comparison import Comparison
from evalprism.errors import EvalprismError
from evalprism.stats.confidence_set import ConfidenceSet, model_confidence_set
from evalprism.stats.gate import EXIT_CODES, GateResult, non_inferiority

#: the worst verdict decides the build: a regression over a run that cannot be told apart
_SEVERITY = ("pass", "cannot tell", "regression")


def gate_results(rows: Sequence[Comparison], baseline: str, margin: float, alpha: float) -> list[GateResult]:
    """Each run against ``baseline`` over all its items (the ``all`` row of the pair)."""
    out = []
    for r in rows:
        if r.benchmark != "all" or r.run_a != baseline:
            continue
        if r.items < 2 or not np.isfinite(r.se):
            out.append(GateResult(r.run_b, baseline, r.difference, np.nan, np.nan, margin, alpha, "cannot tell"))
            continue
        se, df = (r.se, r.df) if r.se > 0 else (0.0, max(r.df, 1))
        out.append(non_inferiority(r.run_b, baseline, r.difference, se, df, margin, alpha))
    return out


def gate_exit_code(results: Sequence[GateResult]) -> int:
    """The build's exit code: 1 when a run regressed, else 3 when one cannot be told, else 0."""
    if not results:
        return 0
    worst = max((r.verdict for r in results), key=_SEVERITY.index)
    return EXIT_CODES[worst]


def gate_table(results: Sequence[GateResult]) -> pd.DataFrame:
    """gate.csv: per run, the difference to the baseline, its one-sided bounds, the margin, the level,
    the verdict and its exit code."""
    return pd.DataFrame(
        {
            "run": [r.candidate for r in results],
            "baseline": [r.baseline for r in results],
            "difference": [r.difference for r in results],
            "lower": [r.lower for r in results],
            "upper": [r.upper for r in results],
            "margin": [r.margin for r in results],
            "alpha": [r.alpha for r in results],
            "verdict": [r.verdict for r in results],
            "exit_code": [r.exit_code for r in results],
        }
    )


def junit_xml(results: Sequence[GateResult]) -> str:
    """The gate as JUnit XML (one test case per run; a regression is a failure, "cannot tell" a skip
    with its reason), which CI systems (GitLab, Jenkins, GitHub test reporters) show per test."""
    suite = ElementTree.Element(
        "testsuite",
        name="evalprism release gate",
        tests=str(len(results)),
        failures=str(sum(r.verdict == "regression" for r in results)),
        skipped=str(sum(r.verdict == "cannot tell" for r in results)),
    )
    for r in results:
        case = ElementTree.SubElement(
            suite, "testcase", classname="evalprism.compare", name=f"{r.candidate} vs {r.baseline}"
        )
        if r.verdict == "regression":
            ElementTree.SubElement(case, "failure", message=r.sentence())
        elif r.verdict == "cannot tell":
            ElementTree.SubElement(case, "skipped", message=r.sentence())
        else:
            ElementTree.SubElement(case, "system-out").text = r.sentence()
    return ElementTree.tostring(suite, encoding="unicode", xml_declaration=True)


def annotation_lines(results: Sequence[GateResult]) -> list[str]:
    """One GitHub Actions workflow command per run: ``::error`` for a regression, ``::warning`` when
    the items cannot tell, ``::notice`` for a pass (the runner shows them on the job's summary)."""
    level = {"regression": "error", "cannot tell": "warning", "pass": "notice"}
    return [f"::{level[r.verdict]} title=evalprism gate::{_escape(r.sentence())}" for r in results]


def _escape(text: str) -> str:
    """A workflow command's message escapes %, CR and LF (GitHub's own escaping rules)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def common_losses(
    keys: list[np.ndarray], scores: list[np.ndarray], groups: list[np.ndarray] | None, runs: Sequence[str]
) -> np.ndarray:
    """Losses (1 - score), units x runs, on the items every run answered: per item, or per cluster
    (the mean over its items) when ``groups`` (each run's cluster code per item) are given."""
    common = keys[0]
    for k in keys[1:]:
        common = np.intersect1d(common, k, assume_unique=True)
    if len(common) < 2:
        raise EvalprismError(
            f"the confidence set compares every run on the items all of them answered: {len(common)} of "
            f"the items are common to {', '.join(runs)}",
            parameter="confidence_set",
        )
    columns = [1.0 - s[np.searchsorted(k, common)] for k, s in zip(keys, scores, strict=True)]
    losses = np.column_stack(columns)
    if groups is None:
        return losses
    codes, _ = pd.factorize(groups[0][np.searchsorted(keys[0], common)])
    return pd.DataFrame(losses).groupby(codes, sort=True).mean().to_numpy()


def confidence_set(losses: np.ndarray, runs: Sequence[str], level: float, seed: int) -> ConfidenceSet:
    """The model confidence set at ``level`` (the units resampled: items, or clusters)."""
    return model_confidence_set(losses, runs, alpha=1.0 - level, seed=seed)


def confidence_set_table(cs: ConfidenceSet) -> pd.DataFrame:
    """confidence_set.csv: each run in elimination order (first eliminated first), its MCS p-value and
    whether it is in the set."""
    included = set(cs.included)
    return pd.DataFrame(
        {
            "run": [name for name, _ in cs.order],
            "eliminated": [i + 1 if name not in included else 0 for i, (name, _) in enumerate(cs.order)],
            "p_mcs": [p for _, p in cs.order],
            "in_set": [name in included for name, _ in cs.order],
        }
    )
