"""Plain test helpers (imported as ``from helpers import ...``): the repository and real-data
locations, a small responses table, and the CLI run in-process. Fixtures live in conftest.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"


def shared_data(name: str) -> Path:
    """A folder of ../shared/data, or skip with the reason when this checkout has none."""
    path = SHARED_DATA / name
    if not path.exists():
        pytest.skip(f"real data {path} is not present (a fresh clone has no ../shared)")
    return path


def small_responses() -> pd.DataFrame:
    """3 questions x 2 models x 2 temperatures; model 'good' answers right, model 'bad' wrong.

    Setting (q3, bad, 1.0) has only 3 responses, the others 5: unequal ECDF sizes.
    """
    questions = {
        "q1": (["Paris"], ["Paris", "Paris.", "Lyon", "Paris", "Paris"], ["Berlin", "Rome", "Madrid", "banana", "Berlin"]),
        "q2": (["Mount Fuji"], ["Mount Fuji", "Fuji", "Mount Fuji", "Mount Fuji,", "Mount Fuji"],
               ["computer", "Yari-ga-take", "computer", "a river", "computer"]),
        "q3": (["2003"], ["2003", "2003", "2003;", "2004", "2003"], ["1999", "tomato", "1999", "1999", "1999"]),
    }
    rows = []
    for q, (refs, good, bad) in questions.items():
        for temp in ("0.0", "1.0"):
            for model, answers in (("good", good), ("bad", bad)):
                if q == "q3" and model == "bad" and temp == "1.0":
                    answers = answers[:3]
                for i, a in enumerate(answers):
                    rows.append({"question_id": q, "model": model, "temperature": temp, "response": a,
                                 "references": json.dumps(refs), "group": "geo" if q != "q3" else "time",
                                 "note": f"{q}-{model}"})
    return pd.DataFrame(rows)


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run the evalprism console entry point in-process; return (exit code, stdout, stderr)."""
    from evalprism.cli import main

    old = sys.argv
    sys.argv = ["evalprism", *map(str, args)]
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        sys.argv = old
    out = capsys.readouterr()
    return code, out.out, out.err
