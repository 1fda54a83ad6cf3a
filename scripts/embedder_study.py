"""What the static encoder costs where an analysis depends on geometry (issue 43, item 1).

The analyses embed with ``minilm`` by default; ``static`` (the router's static model distilled from the
same MiniLM, the mean of its token vectors) is one to two orders of magnitude faster. This script runs
the same analysis with each embedder and says how far the results move:

- ``judges``: TREC DL19 and DL20 (``../shared/data/dl1920-llmjudge``), each year on its own with the
  options of ``scripts/judges_real_data.py``. Per year: the adjusted Rand index of the pairs' cluster
  assignments (noise as one more label, and over the pairs dense under both), clusters and noise share,
  the dense-vs-noise AC1 per judge, and the bias-prone queries (ΔAC1, the seed's rule) each finds.
- ``ecdf``: a responses table (the full Renze & Guven study: ``python scripts/renze.py convert ...``),
  analysed by configuration with ``--extract``/``--choices`` as in the README. The adjusted Rand index of
  the settings' clusters, how many settings change cluster, and the change in each configuration's
  accuracy (the final answer is the response nearest the mean embedding, eq. 6, so it can move).

Usage::

    python scripts/embedder_study.py judges [--data DIR] [--embedders minilm static] [--years DL19 DL20]
    python scripts/embedder_study.py ecdf out/renze.parquet [--embedders minilm static] [--clusters 8]

Prints markdown (the tables of docs/embedder_study.md) and the seconds each run took.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import adjusted_rand_score

from evalprism.ecdf import EcdfOptions
from evalprism.ecdf import analyze as analyze_ecdf
from evalprism.io import read_table
from evalprism.io.embed_options import EmbedOptions
from evalprism.judges import ClusterOptions, JudgesOptions
from evalprism.judges import analyze as analyze_judges

HUMAN = "human_label"
JUDGES = ["gpt4o_umbrela", "gpt4_umbrela", "gpt4o_binary", "gpt4_binary", "llama32_binary"]
YEARS = {"DL19": "trec-dl-2019-passage", "DL20": "trec-dl-2020-passage"}
EXTRACT = r"""Answer\(\s*["']?([A-E])"""


def markdown(frame: pd.DataFrame, floatfmt: str = ".3f") -> str:
    cols = list(frame.columns)
    lines = ["| " + " | ".join(map(str, cols)) + " |", "|" + "---|" * len(cols)]
    for row in frame.itertuples(index=False):
        cells = [format(v, floatfmt) if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def judges_run(part: pd.DataFrame, embedder: str, min_cluster_size: int | None, quiet: bool) -> tuple[object, float]:
    """One year analysed with one embedder (the options of scripts/judges_real_data.py) and its seconds."""
    options = JudgesOptions(
        human=HUMAN,
        llm=[j for j in JUDGES if j in part.columns],
        cluster=ClusterOptions(min_cluster_size=min_cluster_size, min_samples=5, n_components=10),
        embedding=EmbedOptions(embedder=embedder),
    )
    start = time.perf_counter()
    result = analyze_judges(part, options, progress=not quiet)
    return result, time.perf_counter() - start


def flagged(result: object) -> dict[str, set[str]]:
    """Per judge, the query ids the seed's ΔAC1 rule marks bias-prone."""
    queries = result.queries  # type: ignore[attr-defined]
    marked = queries[queries["bias_prone"].astype(bool)]
    return {str(j): set(map(str, g["query_id"])) for j, g in marked.groupby("judge")}


def judges_study(
    data: Path, embedders: Sequence[str], years: Sequence[str], min_cluster_size: int | None, quiet: bool
) -> None:
    table = read_table(data / "dl1920_judgments.jsonl")
    base, other = embedders[0], embedders[1]
    rows, judge_rows = [], []
    for year in years:
        part = table[table["collection"] == YEARS[year]].reset_index(drop=True)
        part.attrs = dict(table.attrs)
        runs = {e: judges_run(part, e, min_cluster_size, quiet) for e in embedders}
        labels = {e: runs[e][0].pairs["cluster"].to_numpy() for e in embedders}  # type: ignore[attr-defined]
        dense = (labels[base] >= 0) & (labels[other] >= 0)
        rows.append(
            {
                "year": year,
                "pairs": len(part),
                "ARI (all pairs, noise a label)": adjusted_rand_score(labels[base], labels[other]),
                "ARI (pairs dense under both)": adjusted_rand_score(labels[base][dense], labels[other][dense]),
                **{f"clusters {e}": int(labels[e].max()) + 1 for e in embedders},
                **{f"noise {e}": float((labels[e] < 0).mean()) for e in embedders},
                **{f"seconds {e}": round(runs[e][1], 1) for e in embedders},
            }
        )
        marks = {e: flagged(runs[e][0]) for e in embedders}
        conc = {e: runs[e][0].concentration.set_index("judge") for e in embedders}  # type: ignore[attr-defined]
        for judge in conc[base].index:
            a, b = marks[base].get(judge, set()), marks[other].get(judge, set())
            judge_rows.append(
                {
                    "year": year,
                    "judge": judge,
                    **{f"AC1 dense / noise {e}": _dense_noise(conc[e], judge) for e in embedders},
                    **{f"bias-prone {e}": len(m.get(judge, set())) for e, m in marks.items()},
                    "found by both": len(a & b),
                    "Jaccard": len(a & b) / len(a | b) if a | b else float("nan"),
                }
            )
    print(f"\n## judges: {base} against {other}\n")
    print(markdown(pd.DataFrame(rows)))
    print(f"\n## judges: dense-vs-noise agreement and bias-prone queries per judge ({base} vs {other})\n")
    print(markdown(pd.DataFrame(judge_rows)))


def _dense_noise(conc: pd.DataFrame, judge: str) -> str:
    row = conc.loc[judge]
    return f"{row['ac1_dense']:.3f} / {row['ac1_noise']:.3f}"


def ecdf_run(
    table: pd.DataFrame, embedder: str, by: list[str], clusters: int | str, quiet: bool
) -> tuple[object, float]:
    """The README's Renze analysis with one embedder, and its seconds."""
    options = EcdfOptions(
        by=by,
        extract=EXTRACT,
        choices="choices",
        clusters=clusters,
        embedding=EmbedOptions(embedder=embedder),
    )
    start = time.perf_counter()
    result = analyze_ecdf(table, options, progress=not quiet)
    return result, time.perf_counter() - start


def ecdf_study(responses: Path, embedders: Sequence[str], by: list[str], clusters: int | str, quiet: bool) -> None:
    table = read_table(responses)
    base, other = embedders[0], embedders[1]
    runs = {e: ecdf_run(table, e, by, clusters, quiet) for e in embedders}
    keys = ["question_id", *by]
    settings = {e: runs[e][0].settings.set_index(keys).sort_index() for e in embedders}  # type: ignore[attr-defined]
    a, b = settings[base]["cluster"], settings[other]["cluster"].reindex(settings[base].index)
    accuracy = {e: runs[e][0].accuracy for e in embedders}  # type: ignore[attr-defined]
    summary = {
        "settings": len(a),
        "ARI of the settings' clusters": adjusted_rand_score(a.to_numpy(), b.to_numpy()),
        "settings in another cluster (labels matched by quality rank)": int((a.to_numpy() != b.to_numpy()).sum()),
        **{f"K {e}": int(settings[e]["cluster"].max()) + 1 for e in embedders},
        **{f"seconds {e}": round(runs[e][1], 1) for e in embedders},
    }
    if all(acc is not None for acc in accuracy.values()):
        cells, overall = _accuracy_change(accuracy[base], accuracy[other], by)
        summary["largest change in a configuration's accuracy"] = float(np.nanmax(np.abs(overall)))
        summary["mean change"] = float(np.nanmean(np.abs(overall)))
        summary["largest change in a (group, configuration) cell"] = float(np.nanmax(np.abs(cells)))
    print(f"\n## ecdf: {base} against {other}\n")
    print(markdown(pd.DataFrame([summary])))


def _accuracy_change(base: pd.DataFrame, other: pd.DataFrame, by: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The change in accuracy from ``base`` to ``other`` per (group, configuration) cell and per
    configuration over all its questions (the cells weighted by their questions)."""
    merged = base.merge(other, on=["group", *by], suffixes=("_a", "_b"))
    cells = (merged["accuracy_b"] - merged["accuracy_a"]).to_numpy(dtype=float)
    right = merged.assign(
        a=merged["accuracy_a"] * merged["n_questions_a"], b=merged["accuracy_b"] * merged["n_questions_a"]
    )
    per = right.groupby(by)[["a", "b", "n_questions_a"]].sum()
    return cells, ((per["b"] - per["a"]) / per["n_questions_a"]).to_numpy(dtype=float)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="study", required=True)
    judges = sub.add_parser("judges")
    judges.add_argument(
        "--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/dl1920-llmjudge"
    )
    judges.add_argument("--years", nargs="+", default=list(YEARS), choices=list(YEARS))
    judges.add_argument("--min-cluster-size", type=int, default=None, help="default: max(15, pairs/700)")
    ecdf = sub.add_parser("ecdf")
    ecdf.add_argument("responses", type=Path)
    ecdf.add_argument("--clusters", default="8")
    ecdf.add_argument("--by", nargs="+", default=["model", "agent", "temperature"])
    for p in (judges, ecdf):
        p.add_argument("--embedders", nargs=2, default=["minilm", "static"])
        p.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    if args.study == "judges":
        judges_study(args.data, args.embedders, args.years, args.min_cluster_size, args.quiet)
    else:
        clusters = args.clusters if args.clusters == "auto" else int(args.clusters)
        ecdf_study(args.responses, args.embedders, args.by, clusters, args.quiet)


if __name__ == "__main__":
    main()
