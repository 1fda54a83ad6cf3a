"""The real-data study of issue 6: the judge-agreement bias map on TREC DL 2019 and 2020.

Data: ``../shared/data/dl1920-llmjudge`` (20,646 NIST-judged query-passage pairs with GPT-4o, GPT-4
and Llama-3.2 labels; research-only text, never copied into the project). Each year is analysed on
its own, as in the paper, with the default minilm embedder and the seed's instruction, and the script
prints (markdown):

1. overall AC1 (95% CI) and Cohen's kappa per judge and year;
2. dense clusters against the noise set (the seed's main claim);
3. the top bias-prone queries per judge with their direction.

Usage::

    EVALPRISM_CACHE_DIR=/tmp/evalprism-cache python scripts/judges_real_data.py \\
        [--data ../shared/data/dl1920-llmjudge] [--out /tmp/judges-dl1920] [--top 5] \\
        [--min-cluster-size N] [--min-samples 5] [--components 10] [--selection auto|eom|leaf]
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import pandas as pd

from evalprism.io import read_table
from evalprism.judges import ClusterOptions, JudgesOptions, analyze

HUMAN = "human_label"
JUDGES = ["gpt4o_umbrela", "gpt4_umbrela", "gpt4o_binary", "gpt4_binary", "llama32_binary"]
YEARS = {"trec-dl-2019-passage": "DL19", "trec-dl-2020-passage": "DL20"}


def markdown(frame: pd.DataFrame, floatfmt: str = ".3f") -> str:
    cols = list(frame.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for row in frame.itertuples(index=False):
        cells = [format(v, floatfmt) if isinstance(v, float) else str(v) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared/data/dl1920-llmjudge"
    )
    parser.add_argument("--out", type=Path, default=Path("/tmp/judges-dl1920"))
    parser.add_argument("--top", type=int, default=5)
    parser.add_argument("--min-cluster-size", type=int, default=None, help="default: max(15, pairs/700)")
    parser.add_argument("--min-samples", type=int, default=5)
    parser.add_argument("--components", type=int, default=10)
    parser.add_argument(
        "--selection",
        choices=["auto", "eom", "leaf"],
        default="auto",
        help="HDBSCAN cluster_selection_method (auto: eom, leaf when eom is degenerate)",
    )
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()

    table = read_table(args.data / "dl1920_judgments.jsonl")
    overall, concentration, top = [], [], []
    for collection, year in YEARS.items():
        part = table[table["collection"] == collection].reset_index(drop=True)
        part.attrs = dict(table.attrs)
        result = analyze(
            part,
            JudgesOptions(
                human=HUMAN,
                llm=JUDGES,
                cluster=ClusterOptions(
                    min_cluster_size=args.min_cluster_size,
                    min_samples=args.min_samples,
                    n_components=args.components,
                    cluster_selection_method=args.selection,
                ),
            ),
            progress=not args.quiet,
        )
        replace(result, title=f"Where LLM relevance judges disagree with NIST assessors: TREC {year}").save(
            args.out / year
        )
        o = result.overall.assign(year=year, pairs=len(part))
        overall.append(o)
        c = result.concentration.assign(
            year=year,
            clusters_found=int(result.pairs["cluster"].max()) + 1,
            noise_share=float((result.pairs["cluster"] < 0).mean()),
        )
        concentration.append(c)
        q = result.queries[result.queries["bias_prone"].astype(bool)]
        top.append(q.groupby("judge", sort=False).head(args.top).assign(year=year))
        n_flagged = result.queries.groupby("judge")["bias_prone"].sum()
        print(
            f"{year}: {len(part)} pairs, {part['query_id'].nunique()} queries, "
            f"{int(result.pairs['cluster'].max()) + 1} clusters, noise {c['noise_share'].iat[0]:.1%}; "
            f"bias-prone queries per judge: {n_flagged.to_dict()}"
            + (" (DEGENERATE clustering: see the report)" if result.degenerate else "")
        )

    overall_df = pd.concat(overall)
    print("\n## Overall agreement per judge and year (binary: human >= 2; graded LLM >= 2)\n")
    print(
        markdown(
            overall_df[
                [
                    "year",
                    "judge",
                    "n_pairs",
                    "ac1",
                    "ac1_lo",
                    "ac1_hi",
                    "kappa",
                    "percent_agreement",
                    "false_negatives",
                    "false_positives",
                ]
            ]
        )
    )
    conc = pd.concat(concentration)
    print("\n## Dense clusters vs noise\n")
    print(
        markdown(
            conc[
                [
                    "year",
                    "judge",
                    "clusters",
                    "n_dense",
                    "n_noise",
                    "ac1_dense",
                    "ac1_noise",
                    "disagreement_dense",
                    "disagreement_noise",
                    "cluster_ac1_min",
                    "cluster_ac1_median",
                    "clusters_below_noise_ac1",
                    "homogeneity_p",
                    "worst_clusters_pair_share",
                    "worst_clusters_disagreement_share",
                ]
            ],
            floatfmt=".3g",
        )
    )
    tops = pd.concat(top)
    print(f"\n## Top {args.top} bias-prone queries per judge and year\n")
    print(
        markdown(
            tops[
                [
                    "year",
                    "judge",
                    "rank",
                    "query_id",
                    "query",
                    "dac1",
                    "ac1_max",
                    "ac1_min",
                    "flag_abs",
                    "flag_outlier",
                    "flag_flip",
                    "direction",
                    "false_negatives_min",
                    "false_positives_min",
                ]
            ],
            floatfmt=".2f",
        )
    )
    print(f"\nreports: {args.out}/DL19/report.html, {args.out}/DL20/report.html")


if __name__ == "__main__":
    main()
