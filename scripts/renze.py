"""Convert the Renze & Guven temperature study (comprehensive-100 exam) to an evalprism responses table.

    python scripts/renze.py convert ../shared/data/renze-temperature out/renze.parquet
    python scripts/renze.py demo-slice ../shared/data/renze-temperature src/evalprism/demo/data

One row per response: question_id, model, agent, temperature, response_id, response (raw text),
references (JSON list: the gold choice's text), choices (JSON object letter -> text), group (topic),
gold (letter), source. With ``--extract 'Answer\\(\\s*["\\']?([A-E])' --choices choices`` the ECDF
analysis compares the text of the chosen option with the text of the correct one.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import sys
from pathlib import Path

import pandas as pd

EXTRACT = r"""Answer\(\s*["']?([A-E])"""

# The demo slice: 4 models x 3 temperatures (chain of thought), 20 questions across topics.
DEMO_MODELS = ["claude-3-opus-20240229", "gpt-4", "gpt-35-turbo", "llama-2-7b-chat"]
DEMO_TEMPERATURES = ["0.0", "0.5", "1.0"]
DEMO_QUESTIONS_PER_TOPIC = {"Law": 5, "Math": 4, "Logic": 2, "English": 2, "Science": 2}
DEMO_OTHER_TOPICS = 5


def read_exam(root: Path) -> pd.DataFrame:
    rows = [json.loads(line) for line in (root / "exams" / "comprehensive-100.jsonl").open(encoding="utf-8")]
    exam = pd.DataFrame(rows)
    exam["references"] = [json.dumps([c[a]]) for c, a in zip(exam["choices"], exam["answer"], strict=True)]
    exam["choices"] = [json.dumps(c, ensure_ascii=False) for c in exam["choices"]]
    return exam.rename(columns={"id": "question_id", "topic": "group", "answer": "gold"})


def read_responses(root: Path, files: list[Path] | None = None) -> pd.DataFrame:
    csv.field_size_limit(sys.maxsize)
    frames = []
    for f in files or sorted((root / "responses").glob("*comprehensive-100*.csv")):
        df = pd.read_csv(f, dtype=str, keep_default_na=False, engine="python")
        frames.append(df)
    resp = pd.concat(frames, ignore_index=True)
    resp = resp.rename(
        columns={
            "Model Name": "model",
            "Agent Name": "agent",
            "Temperature": "temperature",
            "Problem ID": "question_id",
            "Response ID": "response_id",
            "Text": "response",
        }
    )
    resp["question_id"] = resp["question_id"].astype(int)
    resp["response_id"] = resp["response_id"].astype(int)
    resp["temperature"] = resp["temperature"].astype(float).map(lambda t: f"{t:.1f}")
    return resp[["question_id", "model", "agent", "temperature", "response_id", "response"]]


def to_table(root: Path, files: list[Path] | None = None) -> pd.DataFrame:
    exam = read_exam(root)[["question_id", "group", "source", "gold", "references", "choices"]]
    table = read_responses(root, files).merge(exam, on="question_id", how="left", validate="many_to_one")
    return table.sort_values(["model", "agent", "temperature", "question_id", "response_id"]).reset_index(drop=True)


def demo_questions(exam: pd.DataFrame) -> list[int]:
    picked: list[int] = []
    for topic, n in DEMO_QUESTIONS_PER_TOPIC.items():
        picked += exam.loc[exam["group"] == topic, "question_id"].head(n).tolist()
    others = exam[~exam["group"].isin(list(DEMO_QUESTIONS_PER_TOPIC))]
    picked += others.groupby("group").head(1)["question_id"].head(DEMO_OTHER_TOPICS).tolist()
    return sorted(picked)


def check_root(root: Path) -> None:
    """Stop with one message when ``root`` is not the study's folder (its exam and response files)."""
    exam = root / "exams" / "comprehensive-100.jsonl"
    if not exam.is_file():
        raise SystemExit(
            f"{exam}: not found (give the renze-temperature folder, e.g. ../shared/data/renze-temperature)"
        )
    if not any((root / "responses").glob("*comprehensive-100*.csv")):
        raise SystemExit(f"{root / 'responses'}: no '*comprehensive-100*.csv' response files")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    conv = sub.add_parser("convert", help="the full table (149 settings x 100 questions)")
    conv.add_argument("root", type=Path)
    conv.add_argument("out", type=Path)
    demo = sub.add_parser("demo-slice", help="the small slice shipped in the package")
    demo.add_argument("root", type=Path)
    demo.add_argument("out_dir", type=Path)
    args = parser.parse_args()
    check_root(args.root)
    if args.cmd == "convert":
        table = to_table(args.root)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        table.to_parquet(args.out, index=False) if args.out.suffix == ".parquet" else table.to_csv(
            args.out, index=False
        )
        print(f"{args.out}: {len(table)} responses")
        return
    files = [
        args.root / "responses" / f"{m} - chain_of_thought - comprehensive-100 - temp-{t}.csv"
        for m in DEMO_MODELS
        for t in DEMO_TEMPERATURES
    ]
    table = to_table(args.root, files)
    table = table[table["question_id"].isin(demo_questions(read_exam(args.root)))]
    table = table.drop(columns=["agent"])
    args.out_dir.mkdir(parents=True, exist_ok=True)
    out = args.out_dir / "renze_slice.csv.gz"
    table.to_csv(out, index=False, compression={"method": "gzip", "mtime": 0})
    shutil.copy(args.root / "LICENSE", args.out_dir / "LICENSE.renze-temperature")
    print(
        f"{out}: {len(table)} responses, {table['question_id'].nunique()} questions, "
        f"{table.groupby(['model', 'temperature']).ngroups} configurations"
    )


if __name__ == "__main__":
    main()
