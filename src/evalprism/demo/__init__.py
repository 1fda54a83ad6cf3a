"""The packaged demo: every analysis built so far, run on small real data shipped in the package.

Data: ``data/renze_slice.csv.gz``, 20 questions x 12 (model, temperature) settings of the
Renze & Guven temperature study (BSD-2-Clause, licence in ``data/LICENSE.renze-temperature``).
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from evalprism.io import read_table
from evalprism.report import write_index

DEMO_EXTRACT = r"""Answer\(\s*["']?([A-E])"""


def demo_data_path(name: str = "renze_slice.csv.gz") -> Path:
    """Path of a file in the packaged demo data."""
    return Path(str(resources.files("evalprism.demo") / "data" / name))


def run_demo(out_dir: str | Path = "evalprism-demo", *, cache_dir: str | None = None, progress: bool = True) -> Path:
    """Run each analysis on its demo data into ``out_dir/<analysis>/`` and write ``out_dir/index.html``."""
    from evalprism.ecdf import analyze

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    table = read_table(demo_data_path())
    result = analyze(table, by=["model", "temperature"], extract=DEMO_EXTRACT, choices="choices",
                     clusters=6, seed=0, cache_dir=cache_dir, progress=progress)
    result.save(out_dir / "ecdf", title="Demo: response-quality distributions on the Renze temperature study")
    entries = [("ecdf/report.html", "Response-quality distributions (ECDF clustering)",
                "20 exam questions × 4 models × 3 temperatures, 10 chain-of-thought answers each")]
    return write_index(out_dir / "index.html", "evalprism demo", entries)
