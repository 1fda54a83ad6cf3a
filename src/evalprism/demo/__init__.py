"""The packaged demo: every analysis built so far, run on small real data shipped in the package.

Data: ``data/renze_slice.csv.gz``, 20 questions x 12 (model, temperature) settings of the
Renze & Guven temperature study (BSD-2-Clause, licence in ``data/LICENSE.renze-temperature``).
P2L runs on battles simulated from planted topic leaderboards (:mod:`evalprism.p2l.simulate`):
the public preference data sets with prompts are not licensed for redistribution.
"""

from __future__ import annotations

from dataclasses import replace
from importlib import resources
from pathlib import Path

from evalprism.ecdf.options import EcdfOptions
from evalprism.io import read_table
from evalprism.io.outputs import OutputKind, OutputTarget, as_target, atomic_output_dir
from evalprism.p2l.options import PromptSetOptions, RouteOptions
from evalprism.report import IndexEntry, write_index
from evalprism.stem.options import LocateOptions, PoolOptions

DEMO_EXTRACT = r"""Answer\(\s*["']?([A-E])"""


def demo_data_path(name: str = "renze_slice.csv.gz") -> Path:
    """Path of a file in the packaged demo data."""
    return Path(str(resources.files("evalprism.demo") / "data" / name))


def run_demo(
    out_dir: str | Path | OutputTarget = "evalprism-demo", *, cache_dir: str | None = None, progress: bool = True
) -> Path:
    """Run each analysis on its demo data into ``out_dir/<analysis>/`` and write ``out_dir/index.html``
    (all of it at once, when every analysis has finished); return the index's path."""
    target = as_target(out_dir, OutputKind.DEMO)
    with atomic_output_dir(target, OutputKind.DEMO) as staging:
        _run_all(staging, cache_dir=cache_dir, progress=progress)
    return target.path / "index.html"


def _run_all(out_dir: Path, *, cache_dir: str | None, progress: bool) -> Path:
    from evalprism.ecdf import analyze
    from evalprism.ecdf.report import index_line

    table = read_table(demo_data_path())
    result = analyze(
        table,
        EcdfOptions(by=["model", "temperature"], extract=DEMO_EXTRACT, choices="choices", clusters=6, seed=0),
        cache_dir=cache_dir,
        progress=progress,
    )
    replace(result, title="Demo: response-quality distributions on the Renze temperature study").save(out_dir / "ecdf")
    entries = [
        IndexEntry(
            "ecdf/report.html",
            "Response-quality distributions (ECDF clustering)",
            "20 exam questions × 4 models × 3 temperatures, 10 chain-of-thought answers each",
            index_line(result),
        )
    ]
    entries += run_p2l_demo(out_dir / "p2l", cache_dir=cache_dir, progress=progress)
    entries += run_judges_demo(out_dir / "judges", cache_dir=cache_dir, progress=progress)
    entries += run_stem_demo(out_dir / "stem", progress=progress)
    return write_index(out_dir / "index.html", "evalprism demo", entries)


#: demo costs per query (e.g. cents): the strongest generalist is the most expensive
DEMO_COSTS = {"poet-7b": 0.2, "calc-13b": 0.4, "coder-34b": 1.0, "generalist-70b": 3.0}


def run_p2l_demo(out_dir: Path, *, cache_dir: str | None = None, progress: bool = True) -> list[IndexEntry]:
    """Marginal leaderboard, P2L training, a prompt-set leaderboard with strengths and a router, on
    4,000 simulated battles over three topics whose leaderboards disagree."""
    import pandas as pd

    from evalprism.p2l import TrainOptions, analyze_prompt_set, fit_leaderboard, reports, train_model
    from evalprism.p2l.router import route_prompts
    from evalprism.p2l.simulate import TOPICS, simulate_topic_battles, topic_prompts

    battles = simulate_topic_battles(4000, seed=0)
    marginal = fit_leaderboard(battles, progress=progress)
    marginal.save(out_dir / "marginal")
    trained = train_model(battles, TrainOptions(seed=0), cache_dir=cache_dir, progress=progress)
    trained.save(out_dir / "model")
    prompts = pd.DataFrame({"prompt": [p for t in TOPICS for p in topic_prompts(t)]})
    board = analyze_prompt_set(
        trained.model, prompts, PromptSetOptions(reference="generalist-70b"), cache_dir=cache_dir, progress=progress
    )
    board.save(out_dir / "leaderboard")
    routes = route_prompts(trained.model, prompts, DEMO_COSTS, RouteOptions(budget=0.8), progress=progress)
    routes.save(out_dir / "router")
    about = "4,000 simulated battles, 4 models, 3 topics with different true leaderboards"
    return [
        IndexEntry(
            "p2l/marginal/report.html",
            "Marginal leaderboard (Bradley-Terry)",
            f"{about}: the average view",
            reports.leaderboard_index_line(marginal),
        ),
        IndexEntry(
            "p2l/model/report.html",
            "P2L training",
            "held-out votes: P2L against the marginal leaderboard",
            reports.training_index_line(trained),
        ),
        IndexEntry(
            "p2l/leaderboard/report.html",
            "Prompt-set leaderboard and strengths",
            "aggregated leaderboard, clustered categories, win rates against the generalist",
            reports.prompt_set_index_line(board),
        ),
        IndexEntry(
            "p2l/router/report.html",
            "Cost-constrained router",
            "Theorem 1 router against the best single model",
            reports.routing_index_line(routes),
        ),
    ]


def run_judges_demo(out_dir: Path, *, cache_dir: str | None = None, progress: bool = True) -> list[IndexEntry]:
    """The judge-agreement bias map on generated query-document pairs (no third-party text): 12
    queries x 5 document genres, two simulated LLM judges that disagree with the human labels only in
    planted cells (one under-recalls definitions for 4 queries, one over-includes news for 3)."""
    from evalprism.judges import JudgesOptions, analyze
    from evalprism.judges.report import index_line
    from evalprism.judges.simulate import simulate_judgments

    table = simulate_judgments(noise=0.03, seed=0)
    options = JudgesOptions(human="human", llm=["llm_strict", "llm_lenient"])
    result = analyze(table, options, cache_dir=cache_dir, progress=progress)
    replace(result, title="Demo: where simulated LLM judges disagree with human relevance labels").save(out_dir)
    return [
        IndexEntry(
            "judges/report.html",
            "Judge-agreement bias map",
            "360 generated query-document pairs, 2 simulated LLM judges with planted disagreement clusters",
            index_line(result),
        )
    ]


def run_stem_demo(out_dir: Path, *, progress: bool = True) -> list[IndexEntry]:
    """STEM on a simulated family (planted two-parameter item-response model, no third-party data):
    the pool and contamination audit of a 4-member family, and five models of other families
    located with 100 items, 100 trials each, beside random sampling and the Bayesian baseline."""
    from evalprism.stem import build_pool, locate_models
    from evalprism.stem.report import location_index_line, pool_index_line
    from evalprism.stem.simulate import simulate_family

    correctness, meta = simulate_family(n_items=3000, seed=0)
    pool = build_pool(correctness, meta, PoolOptions(family="toy"))
    pool.save(out_dir / "pool")
    others = meta.loc[meta["family"] == "other", "model"].tolist()
    located = locate_models(
        pool, correctness, LocateOptions(model=others, items=100, trials=100, seed=0), progress=progress
    )
    located.save(out_dir / "locate")
    about = "3,000 simulated items, a 4-member family (1B-70B) with planted abilities"
    return [
        IndexEntry(
            "stem/pool/report.html",
            "STEM pool and contamination audit",
            f"{about}: anomaly rates, TI levels, weights",
            pool_index_line(pool),
        ),
        IndexEntry(
            "stem/locate/report.html",
            "STEM localization",
            "five other models located with 100 items, against random sampling and the Bayesian interval posterior",
            location_index_line(located),
        ),
    ]
