"""Command line: parse options, call one analysis, write its outputs. No logic lives here.

A command names its inputs (arguments and input files) and its options class (:func:`with_options`:
every option, its flag, help, choices and bounds come from the class's declaration). :func:`_run`
claims the output directory before any work, runs the analysis, prints what its run record says (the
readers' choices, the notes, the findings) and saves the result. Heavy modules load inside the
commands, after typer has checked the options.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional, TypeVar

import typer
from typer._click.exceptions import NoArgsIsHelpError, UsageError  # typer vendors click; not re-exported

from evalprism import __version__
from evalprism.cli_options import with_options
from evalprism.compare.options import CompareOptions
from evalprism.ecdf.options import EcdfOptions
from evalprism.errors import EvalprismError
from evalprism.io.preflight import Expect, Input, check_inputs
from evalprism.judges.options import JudgesOptions
from evalprism.p2l.options import (
    BenchOptions,
    EvaluateOptions,
    FitOptions,
    PromptSetOptions,
    RouteOptions,
    SplitOptions,
    TrainOptions,
)
from evalprism.progress import say
from evalprism.serve.options import ServeOptions
from evalprism.shutdown import skip_exit_collections
from evalprism.stem.options import AuditOptions, LocateOptions, PlanOptions, PoolOptions

if TYPE_CHECKING:
    from evalprism.compare import CompareResult
    from evalprism.io.outputs import SavableResult

#: what a command's work returns: a result that carries its run record and saves itself
Saved = TypeVar("Saved", bound="SavableResult")

app = typer.Typer(
    name="evalprism",
    help="Split an averaged evaluation score into its spectrum.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    # plain help: rich markup would swallow literal brackets ('evalprism[umap]') and typer's rich
    # panels print a '<bool>' type beside every flag
    rich_markup_mode=None,
)

# --- what every command shares: its output directory and how it speaks ---------------------------


def _out_path(value: str | Path) -> Path:
    """--out as given: an empty value is refused here (a Path would silently turn '' into '.'). Typer
    also passes a default (a Path) through this parser."""
    if str(value).strip() == "":
        raise EvalprismError("--out '': name a new output directory, e.g. --out out/run1")
    return Path(value)


def _out(what: str = "Output directory", metavar: str = "DIR") -> Any:
    return typer.Option("--out", "-o", help=f"{what} (created; see --overwrite).", parser=_out_path, metavar=metavar)


Out = Annotated[Path, _out()]
Overwrite = Annotated[
    bool,
    typer.Option(
        "--overwrite",
        help="Replace a previous evalprism output of another command in --out (never other files, never an input).",
    ),
]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress or status output.")]
CacheDir = Annotated[
    Optional[Path],
    typer.Option(
        "--cache-dir", help="Embedding cache directory (default: $EVALPRISM_CACHE_DIR, else ~/.cache/evalprism)."
    ),
]


def _run(
    kind: str,
    out: Path,
    inputs: Sequence[Input | Optional[Path]],
    overwrite: bool,
    quiet: bool,
    work: Callable[[], Saved],
) -> Saved:
    """Claim ``out`` for an output of ``kind`` (the output rules of :mod:`evalprism.io.outputs`) and check
    each :class:`~evalprism.io.preflight.Input` as far as its path tells, before any work and before
    ``work`` imports the analysis (a refused input answers at once); run ``work``, say what its run record
    says, save it, say what was written."""
    target = _claim(out, kind, inputs, overwrite, quiet)
    result = work()
    _say_record(result, quiet)
    result.save(target)
    _wrote(out, quiet)
    return result


def _claim(out: Path, kind: str, inputs: Sequence[Input | Optional[Path]], overwrite: bool, quiet: bool) -> Any:
    """The output target of ``out``, claimed, once the inputs have passed their path checks."""
    from evalprism.io import OutputKind, claim_output
    from evalprism.io.preflight import input_paths

    target = claim_output(out, OutputKind(kind), inputs=input_paths(inputs), overwrite=overwrite, progress=not quiet)
    check_inputs(inputs)
    return target


def _say_record(result: SavableResult, quiet: bool) -> None:
    """The run record's lines: the readers' choices, the notes, the findings."""
    if not quiet:
        for kind, line in result.record.said():
            say(kind, line)


def _wrote(out: Path, quiet: bool) -> None:
    """One line naming the directory and the files the run wrote into it."""
    if not quiet:
        from evalprism.io import written_files

        say("wrote", f"{out}/ ({', '.join(written_files(out))})")


def _version(value: bool) -> None:
    if value:
        typer.echo(__version__)
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", help="Print the version and exit.", callback=_version, is_eager=True)
    ] = False,
) -> None:
    """Split an averaged evaluation score into its spectrum."""


def _group(name: str, help: str) -> typer.Typer:
    """A command group under the root, with the root's help format."""
    group = typer.Typer(help=help, no_args_is_help=True, rich_markup_mode=None)
    app.add_typer(group, name=name)
    return group


# --- ecdf ------------------------------------------------------------------------------------------


@app.command()
@with_options(EcdfOptions)
def ecdf(
    responses: Annotated[Path, typer.Argument(help="Responses table (.jsonl, .csv, .tsv, .parquet).")],
    out: Out,
    *,
    options: EcdfOptions,
    cache_dir: CacheDir = None,
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Response-quality distributions: cluster the ECDFs of many responses per setting (Watanabe & Sun)."""

    def work() -> SavableResult:
        from evalprism.ecdf import analyze
        from evalprism.io import read_table

        return analyze(read_table(responses), options, cache_dir=cache_dir, progress=not quiet)

    _run("ecdf", out, [Input(responses, Expect.TABLE), cache_dir], overwrite, quiet, work)


# --- p2l -------------------------------------------------------------------------------------------

p2l_app = _group("p2l", "Prompt-to-Leaderboard (Frick et al.): pairwise leaderboards from battles.")

P2LModelDir = Annotated[
    Path,
    typer.Argument(
        metavar="P2L_MODEL",
        help="P2L model: a directory from `evalprism p2l train`, or a P2L checkpoint lmarena released.",
    ),
]
GradedOrBattles = (
    "or graded logs with the items' text (lm-eval --log_samples directory, inspect_ai logs, a "
    "model,item_id,score,prompt table): every two models scored on the same item are a battle."
)
PromptFile = Annotated[
    Path,
    typer.Argument(
        help="Prompts: a table with a prompt column, a chat log with a messages column (the user turns are the "
        "prompt), or .txt with one per line."
    ),
]
CostsFile = "Cost table: columns model, cost (cost per query, any unit), or lmarena arena-catalog prices"


@p2l_app.command("fit")
@with_options(FitOptions)
def p2l_fit(
    battles: Annotated[
        Path,
        typer.Argument(
            help="Battles: canonical table, FastChat clean_battle JSON, arena-55k CSV or AlpacaEval annotations; "
            "or graded logs (lm-eval --log_samples directory, inspect_ai logs, a model,item_id,score table): every "
            "two models scored on the same item are a battle."
        ),
    ],
    out: Out,
    *,
    options: FitOptions,
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Marginal leaderboard: one BT / BT-tie / Rao-Kupper / grounded-RK fit with 95% intervals."""

    def fit() -> SavableResult:
        from evalprism.p2l import fit_leaderboard
        from evalprism.p2l.from_logs import read_battles_input

        table = read_battles_input(battles, prompts=False, harness=options.harness)
        return fit_leaderboard(table, options, progress=not quiet)

    _run("p2l fit", out, [Input(battles, Expect.BATTLES)], overwrite, quiet, fit)


@p2l_app.command("split")
@with_options(SplitOptions)
def p2l_split(
    battles: Annotated[
        Path,
        typer.Argument(
            help="Battles with prompts (any supported battles format), or graded logs with the items' text (as `p2l "
            "train` reads them): split by prompt, so by item."
        ),
    ],
    out: Out,
    *,
    options: SplitOptions,
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Split battles by prompt into OUT/train and OUT/test (the input's format), for `p2l evaluate`:
    training's own rule, so --test-fraction F --seed S holds out the prompts `p2l train --val-fraction F
    --seed S` validates on."""

    def split() -> SavableResult:
        from evalprism.p2l import split_battles
        from evalprism.p2l.from_logs import read_battles_input

        return split_battles(read_battles_input(battles, harness=options.harness), options)

    _run("p2l split", out, [Input(battles, Expect.BATTLES)], overwrite, quiet, split)


@p2l_app.command("train")
@with_options(TrainOptions)
def p2l_train(
    battles: Annotated[
        Path, typer.Argument(help="Battles with prompts (any supported battles format), " + GradedOrBattles)
    ],
    out: Annotated[Path, _out("Model directory to write")],
    *,
    options: TrainOptions,
    resume: Annotated[
        bool,
        typer.Option("--resume", help="Continue an interrupted run from OUT.checkpoint (on any number of processes)."),
    ] = False,
    cache_dir: CacheDir = None,
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Train a P2L model: prompt -> one coefficient per model (checkpoints in OUT.checkpoint). Runs
    under `torchrun --nproc-per-node N -m evalprism p2l train ...` on N processes (rank 0 writes)."""
    check_inputs([Input(battles, Expect.BATTLES)])
    from evalprism.p2l import TrainResult, checkpoint_dir_for, train_model
    from evalprism.p2l.from_logs import read_battles_input

    target = TrainResult.claim(out, inputs=[battles, cache_dir], overwrite=overwrite, progress=not quiet)
    result = train_model(
        read_battles_input(battles, prompts=True, harness=options.harness),
        options,
        checkpoint_dir=checkpoint_dir_for(target),
        resume=resume,
        cache_dir=cache_dir,
        progress=not quiet,
    )
    quiet = quiet or not result.main_process
    _say_record(result, quiet)
    result.save(target)
    _wrote(out, quiet)


@p2l_app.command("leaderboard")
@with_options(PromptSetOptions)
def p2l_leaderboard(
    model_dir: P2LModelDir,
    prompts: PromptFile,
    out: Out,
    *,
    options: PromptSetOptions,
    cache_dir: CacheDir = None,
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Leaderboards for a prompt set: per prompt, aggregated, per category, and model strengths."""

    def leaderboards() -> SavableResult:
        from evalprism.io import read_prompts
        from evalprism.p2l import P2LModel, analyze_prompt_set

        table = read_prompts(prompts, options.prompt_column)
        model = P2LModel.load(model_dir, cache_dir=cache_dir, progress=not quiet)
        return analyze_prompt_set(model, table, options, cache_dir=cache_dir, progress=not quiet)

    inputs = [Input(prompts, Expect.PROMPTS), Input(model_dir, Expect.MODEL_DIR), cache_dir]
    _run("p2l leaderboard", out, inputs, overwrite, quiet, leaderboards)


Costs = Annotated[
    Optional[Path],
    typer.Option(
        "--costs",
        help="Cost table (as `p2l route --costs`): value routing policies on the held-out verdicts (P2L router, "
        "best single model, marginal router, cost-matched random mix, oracle).",
    ),
]


@p2l_app.command("evaluate")
@with_options(EvaluateOptions)
def p2l_evaluate(
    model_dir: P2LModelDir,
    battles: Annotated[
        Path,
        typer.Argument(
            help="Held-out battles (prompts not used in training), or graded logs of held-out items (as `p2l train` "
            "reads them)."
        ),
    ],
    out: Out,
    *,
    options: EvaluateOptions,
    costs: Costs = None,
    cache_dir: CacheDir = None,
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Held-out NLL / accuracy / Brier against constant and marginal baselines (NLL split into outcome type and
    winner for rk/grk); with --costs, routing policies valued on the held-out verdicts; aggregation scaling."""

    def evaluation() -> SavableResult:
        from evalprism.io import read_costs
        from evalprism.p2l import evaluate_model_dir
        from evalprism.p2l.from_logs import read_battles_input

        table = read_battles_input(battles, harness=options.harness)  # the battles first: fails before the model loads
        cost_table = None if costs is None else read_costs(costs, options.cost_column)
        return evaluate_model_dir(model_dir, table, options, costs=cost_table, cache_dir=cache_dir, progress=not quiet)

    options.check_costs(costs is not None)  # before any file is read
    inputs = [Input(battles, Expect.BATTLES), Input(costs, Expect.TABLE), Input(model_dir, Expect.MODEL_DIR), cache_dir]
    _run("p2l evaluate", out, inputs, overwrite, quiet, evaluation)


@p2l_app.command("bench")
@with_options(BenchOptions)
def p2l_bench(
    train: Annotated[
        Path,
        typer.Argument(
            help="Training items, graded: every model scored on each item, with the item's text (a "
            "model,item_id,score[,benchmark],prompt table, lm-eval --log_samples directory or inspect_ai logs); or "
            "pairwise battles (prompt, model_a, model_b, winner), HELDOUT then battles too, valued by win rate."
        ),
    ],
    heldout: Annotated[
        Path, typer.Argument(help="Held-out items, graded the same way, or battles (no item or prompt of TRAIN).")
    ],
    out: Out,
    *,
    options: BenchOptions,
    costs: Annotated[
        Optional[Path],
        typer.Option(
            "--costs",
            help=f"{CostsFile}; every scored model needs one. Without it, both splits need a 'cost' column (each "
            "item's cost per model).",
        ),
    ] = None,
    model: Annotated[
        Optional[Path],
        typer.Option("--model", help="A P2L model (`p2l train` directory): valued as the reference router."),
    ] = None,
    cache_dir: CacheDir = None,
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Benchmark routers on held-out data, pointwise on graded items (by win rate on battles): P2L (with
    --model) against kNN, MLP, matrix factorisation, the per-benchmark leaderboard, the best single model,
    a cost-matched random mix and the oracle, one budget rule for all; values with SE by prompt, paired
    differences, BH-adjusted p, AIQ."""

    def work() -> SavableResult:
        from evalprism.io import read_costs
        from evalprism.p2l.bench import bench_routers

        cost_table = None if costs is None else read_costs(costs, options.cost_column)
        return bench_routers(
            train, heldout, cost_table, options, model_dir=model, cache_dir=cache_dir, progress=not quiet
        )

    inputs = [
        Input(train, Expect.RESULTS),
        Input(heldout, Expect.RESULTS),
        Input(costs, Expect.TABLE),
        Input(model, Expect.MODEL_DIR),
        cache_dir,
    ]
    _run("p2l bench", out, inputs, overwrite, quiet, work)


@p2l_app.command("route")
@with_options(RouteOptions)
def p2l_route(
    model_dir: P2LModelDir,
    prompts: PromptFile,
    costs: Annotated[
        Path,
        typer.Option(
            "--costs",
            help=f"{CostsFile} (model_api_name, output_token_price or output_usd_per_1M: the output price is the "
            "cost). Extra columns and models are ignored.",
        ),
    ],
    out: Out,
    *,
    options: RouteOptions,
    cache_dir: CacheDir = None,
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Optimal cost-constrained routing (Theorem 1) with the router's BT coefficient (Algorithm 1)."""

    def routing() -> SavableResult:
        from evalprism.io import read_costs, read_prompts
        from evalprism.p2l import route_model_dir

        table = read_prompts(prompts, options.prompt_column)
        cost_table = read_costs(costs, options.cost_column)
        return route_model_dir(model_dir, table, cost_table, options, cache_dir=cache_dir, progress=not quiet)

    inputs = [Input(prompts, Expect.PROMPTS), Input(costs, Expect.TABLE), Input(model_dir, Expect.MODEL_DIR), cache_dir]
    _run("p2l route", out, inputs, overwrite, quiet, routing)


# --- judges ----------------------------------------------------------------------------------------


@app.command()
@with_options(JudgesOptions)
def judges(
    out: Out,
    judgments: Annotated[
        Optional[Path], typer.Argument(help="Judgments table (.jsonl, .csv, .tsv, .parquet); or use --qrels.")
    ] = None,
    *,
    options: JudgesOptions,
    qrels: Annotated[
        Optional[list[str]],
        typer.Option("--qrels", help="TREC layout: one qrels file per judge, [NAME=]PATH (name: file name)."),
    ] = None,
    topics: Annotated[Optional[Path], typer.Option("--topics", help="TREC layout: topics file, qid<TAB>query.")] = None,
    passages: Annotated[
        Optional[Path], typer.Option("--passages", help="TREC layout: passage file, docno<TAB>text.")
    ] = None,
    cache_dir: CacheDir = None,
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Judge-agreement bias map: where LLM relevance judges disagree with humans (query-document dense vectors)."""
    from evalprism.io.trec_files import named_qrels

    def work() -> SavableResult:
        from evalprism.io import read_judgments_input
        from evalprism.judges import analyze

        table = read_judgments_input(judgments, qrels, topics, passages)
        return analyze(table, options, cache_dir=cache_dir, progress=not quiet)

    inputs = [
        Input(judgments, Expect.TABLE),
        *(Input(named_qrels(q)[1], Expect.QRELS) for q in qrels or []),
        Input(topics, Expect.TOPICS),
        Input(passages, Expect.PASSAGES),
        cache_dir,
    ]
    _run("judges", out, inputs, overwrite, quiet, work)


# --- stem ------------------------------------------------------------------------------------------

stem_app = _group("stem", "STEM (structured transitive evaluation): locate an unknown model on a model family.")

StemCorrectness = Annotated[
    Path,
    typer.Argument(
        help="Correctness: long table (model, item_id, score[, benchmark]), wide model x item matrix, lm-eval "
        "--log_samples directory, inspect_ai log (.eval, .json) or a directory of harness output."
    ),
]
StemModels = Annotated[Path, typer.Option("--models", help="Model metadata table: model, params (billions), family.")]
PoolDir = Annotated[Path, typer.Argument(help="Pool directory from `evalprism stem pool`.")]


@stem_app.command("pool")
@with_options(PoolOptions)
def stem_pool(
    correctness: StemCorrectness,
    models: StemModels,
    out: Annotated[Path, _out("Pool directory to write")],
    *,
    options: PoolOptions,
    panel: Annotated[
        Optional[Path],
        typer.Option(
            "--panel",
            help="Correctness of other models on the same items: the reference panel of the IRT estimator (method "
            "irt; auto uses it from 10 panel models with the family).",
            metavar="OTHER_CORRECTNESS",
        ),
    ] = None,
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Build a family's STS pool: IRVs, transition indices, anomaly rates, discriminability weights."""

    def work() -> SavableResult:
        from evalprism.stem.from_files import pool_from_files

        return pool_from_files(correctness, models, options, panel=panel)

    inputs = [Input(correctness, Expect.RESULTS), Input(panel, Expect.RESULTS), Input(models, Expect.TABLE)]
    _run("stem pool", out, inputs, overwrite, quiet, work)


@stem_app.command("locate")
@with_options(LocateOptions)
def stem_locate(
    pool_dir: PoolDir,
    new_correctness: StemCorrectness,
    out: Out,
    *,
    options: LocateOptions,
    plan: Annotated[
        Optional[Path],
        typer.Option(
            "--plan",
            help="Plan directory from `evalprism stem plan`: estimate the full-pool score from the planned items by "
            "the plan's design weights (without it, answers on part of the pool are taken as a simple random sample "
            "of the pool).",
            metavar="PLAN_DIR",
        ),
    ] = None,
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Locate new models on the pool's family: from their answers on the whole pool (with trials against the truth)
    or on part of it (a plan's items, or any subset: an estimate of the full-pool score)."""

    def work() -> SavableResult:
        from evalprism.stem.from_files import locate_from_files

        return locate_from_files(pool_dir, new_correctness, options, plan=plan, progress=not quiet)

    inputs = [Input(pool_dir, Expect.POOL_DIR), Input(plan, Expect.PLAN_DIR), Input(new_correctness, Expect.RESULTS)]
    _run("stem locate", out, inputs, overwrite, quiet, work)


@stem_app.command("plan")
@with_options(PlanOptions)
def stem_plan(
    pool_dir: PoolDir,
    out: Annotated[Path, _out("Plan directory to write", metavar="PLAN")],
    *,
    options: PlanOptions,
    previous: Annotated[
        Optional[Path],
        typer.Option(
            "--plan",
            help="An adaptive plan (stages 1..K) to extend by stage K+1, picked from the model's --answers on its "
            "items.",
            metavar="PLAN_DIR",
        ),
    ] = None,
    answers: Annotated[
        Optional[Path],
        typer.Option(
            "--answers",
            help="With --plan: the model's answers on the plan's items (any correctness file `stem locate` reads).",
            metavar="ANSWERS",
        ),
    ] = None,
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Which pool items to run a new model on: plan.csv (stratum, inclusion probability, design weight, stage), and
    the lists lm-evaluation-harness (--samples) and inspect_ai (--sample-id) take. Deterministic in (pool, items, seed);
    an adaptive plan's later stages also in the model's answers."""

    def work() -> SavableResult:
        from evalprism.stem.from_files import plan_from_files

        return plan_from_files(pool_dir, options, previous=previous, answers=answers, progress=not quiet)

    inputs = [Input(pool_dir, Expect.POOL_DIR), Input(previous, Expect.PLAN_DIR), Input(answers, Expect.RESULTS)]
    _run("stem plan", out, inputs, overwrite, quiet, work)


@stem_app.command("audit")
@with_options(AuditOptions)
def stem_audit(
    correctness: StemCorrectness,
    models: StemModels,
    out: Out,
    *,
    options: AuditOptions,
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Contamination audit: anomaly rate per benchmark and every non-monotone item over the family."""

    def work() -> SavableResult:
        from evalprism.stem.from_files import audit_from_files

        return audit_from_files(correctness, models, options)

    inputs = [Input(correctness, Expect.RESULTS), Input(models, Expect.TABLE)]
    _run("stem audit", out, inputs, overwrite, quiet, work)


# --- compare ---------------------------------------------------------------------------------------


@app.command()
@with_options(CompareOptions)
def compare(
    runs: Annotated[
        list[Path],
        typer.Argument(
            help="Two or more runs: lm-eval --log_samples directories, inspect_ai logs, score tables (model, item_id, "
            "score in 0..1[, benchmark][, cluster columns]; repeated rows = several samples of an item), or ECDF "
            "responses files (one run per --by configuration, each response a sample of its question). A model name "
            "is a run: a file holding several models gives several runs.",
            metavar="RUN",
        ),
    ],
    out: Out,
    *,
    options: CompareOptions,
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Is B better than A? Paired, clustered, corrected comparison of runs on the items both answered."""

    def comparison() -> CompareResult:
        from evalprism.compare import compare_runs

        return compare_runs(runs, options)

    result = _run("compare", out, [Input(run, Expect.RESULTS) for run in runs], overwrite, quiet, comparison)
    for line in result.ci_annotations():  # GitHub Actions reads workflow commands from stdout
        print(line)
    raise typer.Exit(result.exit_code)


# --- demo, serve, version --------------------------------------------------------------------------


@app.command()
def demo(
    out: Annotated[Path, _out()] = Path("evalprism-demo"),
    cache_dir: CacheDir = None,
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Run every analysis on the packaged demo data and write an index page."""
    target = _claim(out, "demo", [cache_dir], overwrite, quiet)
    from evalprism.demo import run_demo

    index = run_demo(target, cache_dir=str(cache_dir) if cache_dir else None, progress=not quiet)
    if not quiet:
        say("open", str(index))


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(__version__)


@app.command()
@with_options(ServeOptions)
def serve(
    model_dir: P2LModelDir,
    config: Annotated[
        Path, typer.Option("--config", help="Router config (YAML): candidates, costs, budget, opponent, API keys.")
    ],
    *,
    options: ServeOptions,
    decision_log: Annotated[
        Optional[Path],
        typer.Option(
            "--decision-log", help="JSONL decision log (default: the config's decision_log, next to the config)."
        ),
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No status lines, and uvicorn logs warnings only.")
    ] = False,
) -> None:
    """Run the P2L router: an OpenAI-compatible service that routes each prompt to its best candidate."""
    check_inputs([Input(config, Expect.TEXT), Input(model_dir, Expect.MODEL_DIR)])
    from evalprism.serve import serve as run_service

    run_service(model_dir, config, options, decision_log=decision_log, quiet=quiet)


def flag_of(parameter: str) -> str:
    """The flag a library parameter has when no command names it (a message raised outside a command's options)."""
    return "--" + parameter.replace("_", "-")


def usage_message(exc: UsageError) -> str:
    """A command-line slip (an unknown flag, a missing argument, a value outside a flag's choices) as
    one line in evalprism's voice, ending with where the command's flags are listed."""
    message = exc.format_message().replace("Value error, ", "")
    where = f"{exc.ctx.command_path} --help" if exc.ctx is not None else "evalprism --help"
    return f"{message} (see '{where}')"


def main() -> None:
    """Console entry point: user errors become one message and exit code 2, never a traceback."""
    skip_exit_collections()
    try:
        code = app(standalone_mode=False)  # click's usage errors come back to be said as ours
    except NoArgsIsHelpError as exc:  # a bare command group: its help, as click prints it
        print(exc.format_message(), file=sys.stderr)
        sys.exit(exc.exit_code)
    except UsageError as exc:
        say("error", usage_message(exc))
        sys.exit(exc.exit_code)
    except typer.Abort:
        say("interrupted", "")
        sys.exit(130)
    except EvalprismError as exc:
        say("error", exc.naming(flag_of(exc.parameter)) if exc.parameter else str(exc))
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        say("interrupted", "")
        sys.exit(130)
    if isinstance(code, int) and code:
        sys.exit(code)


if __name__ == "__main__":
    main()
