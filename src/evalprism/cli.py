"""Command line: parse options, call one analysis, write its outputs. No logic lives here."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.console import Console

from evalprism import __version__
from evalprism.cli_harness import HarnessEpochsChoice, harness_options
from evalprism.errors import EvalprismError
from evalprism.io.preflight import Expect, Input, check_inputs
from evalprism.shutdown import skip_exit_collections
from evalprism.vocabularies import (
    Adjustment,
    Aggregation,
    BudgetScope,
    CiMethod,
    ClusterSelection,
    Design,
    FinalRule,
    HeadFit,
    IRTKind,
    KMedoidsMethod,
    LocateMethod,
    Missing,
    OutcomeModelName,
    PlanMethod,
    Precision,
    Reduction,
    RouteValueKind,
    ScoreRule,
    Weighting,
    choice_enum,
    number_bounds,
)

if TYPE_CHECKING:
    import pandas as pd

    from evalprism.io import OutputTarget
    from evalprism.io.harness_options import HarnessOptions
    from evalprism.stem import Pool

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
_err = Console(stderr=True)


KMethod = choice_enum("KMethod", KMedoidsMethod)


FinalRuleName = choice_enum("FinalRuleName", FinalRule)


ScoreRuleName = choice_enum("ScoreRuleName", ScoreRule)


Extract = Annotated[
    Optional[str],
    typer.Option("--extract", help="Regex taking the answer span out of each response (last match, group 1)."),
]
Choices = Annotated[Optional[str], typer.Option("--choices", help="Column mapping answer labels to choice texts.")]
CacheDir = Annotated[
    Optional[Path],
    typer.Option(
        "--cache-dir", help="Embedding cache directory (default: $EVALPRISM_CACHE_DIR, else ~/.cache/evalprism)."
    ),
]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress or status output.")]
Overwrite = Annotated[
    bool,
    typer.Option(
        "--overwrite",
        help="Replace a previous evalprism output of another command in --out (never other files, never an input).",
    ),
]


def _seed(value: Optional[int]) -> Optional[int]:
    """--seed, checked by the library's one seed rule (evalprism.io.options.check_seed)."""
    from evalprism.io.options import check_seed

    return check_seed(value)


Seed = Annotated[int, typer.Option("--seed", help="Random seed.", callback=_seed)]


def _out_path(value: str | Path) -> Path:
    """--out as given: an empty value is refused here (a Path would silently turn '' into '.'). Typer
    also passes a default (a Path) through this parser."""
    if str(value).strip() == "":
        raise EvalprismError("--out '': name a new output directory, e.g. --out out/run1")
    return Path(value)


Out = Annotated[
    Path,
    typer.Option("--out", "-o", help="Output directory (created; see --overwrite).", parser=_out_path, metavar="DIR"),
]
Embedder = Annotated[
    str,
    typer.Option(
        "--embedder", help="Frozen text encoder: minilm | st:<local dir> | instructor:<local dir> (judges only)."
    ),
]


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


def _claim(
    out: Path, kind: str, inputs: Sequence[Input | Optional[Path]], overwrite: bool, quiet: bool
) -> OutputTarget:
    """Check --out, then each Input as far as its path tells, before any work and before the analysis is
    imported: a refused input answers at once (see evalprism.io.outputs and evalprism.io.preflight)."""
    from evalprism.io import OutputKind, claim_output
    from evalprism.io.preflight import input_paths

    target = claim_output(out, OutputKind(kind), inputs=input_paths(inputs), overwrite=overwrite, progress=not quiet)
    check_inputs(inputs)
    return target


def _wrote(out: Path, quiet: bool, detail: str = "") -> None:
    """One line naming the directory and the files the run wrote into it."""
    if not quiet:
        from evalprism.io import written_files

        files = written_files(out)
        _err.print(f"[green]wrote[/green] {out}/ ({', '.join(files)}){detail}", highlight=False, soft_wrap=True)


@app.command()
def ecdf(
    responses: Annotated[Path, typer.Argument(help="Responses table (.jsonl, .csv, .tsv, .parquet).")],
    out: Out,
    by: Annotated[Optional[list[str]], typer.Option("--by", help="Setting column (repeat for several).")] = None,
    clusters: Annotated[
        str,
        typer.Option(
            "--clusters",
            "-k",
            help="Number of clusters K, or 'auto': K chosen by stability, the K whose clusterings of random 80% question subsets agree best (adjusted Rand index); among K within 0.005 of the most stable, the mean silhouette breaks the tie.",
        ),
    ] = "auto",
    embedder: Embedder = "minilm",
    method: Annotated[KMethod, typer.Option("--method", help="k-medoids algorithm.")] = KMethod.fasterpam,
    score: Annotated[
        ScoreRuleName,
        typer.Option(
            "--score",
            help="Response quality against the references: cosine (max cosine similarity, eq. 3), exact "
            "(normalised exact match, numbers as numbers: 3.0 = 3, $70 = 70, 1,000 = 1000; 0/1) or contains (a reference occurs in the response, 0/1).",
        ),
    ] = ScoreRuleName.cosine,
    final: Annotated[
        FinalRuleName,
        typer.Option(
            "--final",
            help="Each setting's final answer (for accuracy): medoid (eq. 6, the answer nearest the mean "
            "embedding) or majority (the self-consistency vote over normalised answers); the other is "
            "kept beside it in settings.csv.",
        ),
    ] = FinalRuleName.medoid,
    baseline: Annotated[
        Optional[str],
        typer.Option(
            "--baseline", help="Compare every configuration with this one (e.g. temperature=0.0) instead of all pairs."
        ),
    ] = None,
    permutations: Annotated[
        int, typer.Option("--permutations", help="Label permutations per paired test (999 resolves p = 0.001).")
    ] = 999,
    seed: Seed = 0,
    extract: Extract = None,
    choices: Choices = None,
    group: Annotated[str, typer.Option("--group", help="Topic/subject column, if present.")] = "group",
    cache_dir: CacheDir = None,
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Response-quality distributions: cluster the ECDFs of many responses per setting (Watanabe & Sun)."""
    target = _claim(out, "ecdf", [Input(responses, Expect.TABLE), cache_dir], overwrite, quiet)
    from evalprism.ecdf import analyze
    from evalprism.io import read_table

    table = read_table(responses)
    result = analyze(
        table,
        by=by or [],
        clusters=clusters,
        embedder=embedder,
        method=method.value,
        score=score.value,
        baseline=baseline,
        permutations=permutations,
        seed=seed,
        final=final.value,
        extract=extract,
        choices=choices,
        group=group,
        cache_dir=str(cache_dir) if cache_dir else None,
        progress=not quiet,
    )
    result.save(target)
    _wrote(out, quiet, f"; K={result.options['k']}")


def _group(name: str, help: str) -> typer.Typer:
    """A command group under the root, with the root's help format."""
    group = typer.Typer(help=help, no_args_is_help=True, rich_markup_mode=None)
    app.add_typer(group, name=name)
    return group


p2l_app = _group("p2l", "Prompt-to-Leaderboard (Frick et al.): pairwise leaderboards from battles.")


OutcomeModelChoice = choice_enum("OutcomeModelChoice", OutcomeModelName)
HeadFitName = choice_enum("HeadFitName", HeadFit)
PrecisionName = choice_enum("PrecisionName", Precision)
P2LModelDir = Annotated[
    Path,
    typer.Argument(
        metavar="P2L_MODEL",
        help="P2L model: a directory from `evalprism p2l train`, or a P2L checkpoint lmarena released.",
    ),
]


CiName = choice_enum("CiName", CiMethod)


@p2l_app.command("fit")
@harness_options()
def p2l_fit(
    battles: Annotated[
        Path,
        typer.Argument(
            help="Battles: canonical table, FastChat clean_battle JSON, arena-55k CSV or AlpacaEval annotations; or graded logs (lm-eval --log_samples directory, inspect_ai logs, a model,item_id,score table): every two models scored on the same item are a battle."
        ),
    ],
    out: Out,
    *,
    outcome_model: Annotated[
        OutcomeModelChoice,
        typer.Option("--outcome-model", "--model", help="Outcome model of a battle (--model: its older name)."),
    ] = OutcomeModelChoice.bt,
    ci: Annotated[CiName, typer.Option("--ci", help="95% interval method.")] = CiName.sandwich,
    rounds: Annotated[
        Optional[int],
        typer.Option(
            "--rounds", help="With --ci bootstrap: bootstrap rounds (default 100).", **number_bounds("rounds")
        ),
    ] = None,
    harness: HarnessOptions,
    seed: Seed = 0,
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Marginal leaderboard: one BT / BT-tie / Rao-Kupper / grounded-RK fit with 95% intervals."""
    target = _claim(out, "p2l fit", [Input(battles, Expect.BATTLES)], overwrite, quiet)
    from evalprism.p2l import fit_leaderboard
    from evalprism.p2l.from_logs import read_battles_input

    result = fit_leaderboard(
        read_battles_input(battles, prompts=False, harness=harness),
        outcome_model=outcome_model.value,
        ci=ci.value,
        rounds=rounds,
        seed=seed,
        progress=not quiet,
    )
    _read_notes(result.options.get("read", []), quiet)
    result.save(target)
    _wrote(out, quiet, f"; {len(result.leaderboard)} models")


@p2l_app.command("split")
@harness_options()
def p2l_split(
    battles: Annotated[
        Path,
        typer.Argument(
            help="Battles with prompts (any supported battles format), or graded logs with the items' text (as `p2l train` reads them): split by prompt, so by item."
        ),
    ],
    out: Out,
    *,
    test_fraction: Annotated[
        float, typer.Option("--test-fraction", help="Share of prompts held out for testing.")
    ] = 0.2,
    seed: Annotated[
        int,
        typer.Option("--seed", help="Random seed (a prompt's side: a hash of its text and the seed).", callback=_seed),
    ] = 0,
    harness: HarnessOptions,
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Split battles by prompt into OUT/train and OUT/test (the input's format), for `p2l evaluate`:
    training's own rule, so --test-fraction F --seed S holds out the prompts `p2l train --val-fraction F
    --seed S` validates on."""
    target = _claim(out, "p2l split", [Input(battles, Expect.BATTLES)], overwrite, quiet)
    from evalprism.p2l import split_battles
    from evalprism.p2l.from_logs import read_battles_input

    result = split_battles(read_battles_input(battles, harness=harness), test_fraction=test_fraction, seed=seed)
    _read_notes(result.options.get("read", []), quiet)
    result.save(target)
    b, p = result.options["battles"], result.options["prompts"]
    _wrote(
        out,
        quiet,
        f"; train {b['train']} battles on {p['train']} prompts, test {b['test']} battles on {p['test']} prompts",
    )


AggregationName = choice_enum("AggregationName", Aggregation)
PromptFile = Annotated[
    Path,
    typer.Argument(
        help="Prompts: a table with a prompt column, a chat log with a messages column (the user turns are the prompt), or .txt with one per line."
    ),
]


#: `p2l train`'s --epochs is the epoch loop's; the inspect_ai reader's epochs option is --log-epochs there
TrainLogEpochs = Annotated[
    HarnessEpochsChoice,
    typer.Option(
        "--log-epochs",
        help="inspect_ai logs whose samples ran several epochs: mean (inspect's reduction; must be 0 or 1), first, or all (each epoch its own item).",
    ),
]


@p2l_app.command("train")
@harness_options(epochs=TrainLogEpochs)
def p2l_train(
    battles: Annotated[
        Path,
        typer.Argument(
            help="Battles with prompts (any supported battles format), or graded logs with the items' text (lm-eval --log_samples directory, inspect_ai logs, a model,item_id,score,prompt table): every two models scored on the same item are a battle."
        ),
    ],
    out: Annotated[
        Path,
        typer.Option(
            "--out", "-o", help="Model directory to write (created; see --overwrite).", parser=_out_path, metavar="DIR"
        ),
    ],
    *,
    backbone: Annotated[
        str,
        typer.Option(
            "--backbone",
            help="The model's prompt encoder, saved with it and trainable "
            "with --finetune (unlike --embedder of ecdf/judges, which is a frozen "
            "feature extractor): minilm | st:<local dir> | hf:<local causal LM dir> | "
            "static (distilled from MiniLM once into the cache, ~0.3 ms per prompt; "
            "static:<local encoder dir> distils another encoder).",
        ),
    ] = "minilm",
    outcome_model: Annotated[
        OutcomeModelChoice,
        typer.Option("--outcome-model", "--loss", help="Outcome model of the head's battles (--loss: its older name)."),
    ] = OutcomeModelChoice.bt,
    finetune: Annotated[
        bool, typer.Option("--finetune", help="Train the backbone too (slow on CPU; runs under torchrun on many GPUs).")
    ] = False,
    val_fraction: Annotated[
        float, typer.Option("--val-fraction", help="Share of prompts held out for validation.")
    ] = 0.1,
    fit: Annotated[
        Optional[HeadFitName],
        typer.Option(
            "--fit",
            help="How the head is fitted: ridge (the default with a frozen backbone: to convergence, the penalty chosen by cross-validation over training prompts) | adamw (epochs with early stopping; always with --finetune).",
        ),
    ] = None,
    penalty: Annotated[
        Optional[float],
        typer.Option(
            "--penalty",
            help="With --fit ridge: the penalty λ on the head's weights (default: chosen by 5-fold cross-validation).",
        ),
    ] = None,
    max_epochs: Annotated[
        Optional[int],
        typer.Option(
            "--epochs",
            help="With --fit adamw: maximum epochs (default 200 frozen, 3 fine-tuning).",
            **number_bounds("max_epochs"),
        ),
    ] = None,
    batch_size: Annotated[
        Optional[int],
        typer.Option(
            "--batch-size",
            help="With --fit adamw: battles per optimiser step, over all processes of a torchrun world (default 1024 frozen, 16 fine-tuning).",
            **number_bounds("batch_size"),
        ),
    ] = None,
    micro_batch_size: Annotated[
        Optional[int],
        typer.Option(
            "--micro-batch-size",
            help="With --fit adamw: battles per forward pass and process; gradients accumulate up to --batch-size (default: a process's whole share).",
            **number_bounds("micro_batch_size"),
        ),
    ] = None,
    lr: Annotated[
        Optional[float], typer.Option("--lr", help="With --fit adamw: learning rate of the head (default 3e-3).")
    ] = None,
    backbone_lr: Annotated[
        float, typer.Option("--backbone-lr", help="With --finetune: learning rate of the backbone.")
    ] = 2e-5,
    weight_decay: Annotated[
        Optional[float],
        typer.Option(
            "--weight-decay",
            help="With --fit adamw: AdamW weight decay on the head's weights, not its bias (default 1e-2).",
        ),
    ] = None,
    patience: Annotated[
        Optional[int],
        typer.Option(
            "--patience",
            help="With --fit adamw: epochs without validation improvement before stopping (default 8).",
            **number_bounds("patience"),
        ),
    ] = None,
    max_length: Annotated[
        Optional[int],
        typer.Option(
            "--max-length",
            help="With --finetune: longest prompt read, in tokens (saved with the model; default the backbone's own, 1024 for hf:).",
            **number_bounds("max_length"),
        ),
    ] = None,
    gradient_checkpointing: Annotated[
        bool,
        typer.Option(
            "--gradient-checkpointing",
            help="With --finetune: recompute activations in the backward pass (less memory for large backbones, slower).",
        ),
    ] = False,
    precision: Annotated[
        Optional[PrecisionName],
        typer.Option(
            "--precision",
            help="With --finetune: auto (the default: bfloat16 autocast on GPUs that support it, else float32) | float32 | bfloat16.",
        ),
    ] = None,
    seed: Annotated[
        int, typer.Option("--seed", help="Random seed (split, order, initialisation).", callback=_seed)
    ] = 0,
    resume: Annotated[
        bool,
        typer.Option("--resume", help="Continue an interrupted run from OUT.checkpoint (on any number of processes)."),
    ] = False,
    harness: HarnessOptions,
    cache_dir: CacheDir = None,
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Train a P2L model: prompt -> one coefficient per model (checkpoints in OUT.checkpoint). Runs
    under `torchrun --nproc-per-node N -m evalprism p2l train ...` on N processes (rank 0 writes)."""
    check_inputs([Input(battles, Expect.BATTLES)])
    from evalprism.p2l import TrainOptions, TrainResult, checkpoint_dir_for, train_model
    from evalprism.p2l.from_logs import read_battles_input

    options = TrainOptions(
        backbone=backbone,
        outcome_model=outcome_model.value,
        finetune=finetune,
        fit=fit.value if fit else None,
        penalty=penalty,
        val_fraction=val_fraction,
        max_epochs=max_epochs,
        batch_size=batch_size,
        micro_batch_size=micro_batch_size,
        lr=lr,
        backbone_lr=backbone_lr,
        weight_decay=weight_decay,
        patience=patience,
        max_length=max_length,
        gradient_checkpointing=gradient_checkpointing,
        precision=precision.value if precision else None,
        seed=seed,
    )
    target = TrainResult.claim(out, inputs=[battles, cache_dir], overwrite=overwrite, progress=not quiet)
    result = train_model(
        read_battles_input(battles, prompts=True, harness=harness),
        options,
        checkpoint_dir=checkpoint_dir_for(target),
        resume=resume,
        cache_dir=cache_dir,
        progress=not quiet,
    )
    _read_notes(result.options.get("read", []), quiet or not result.main_process)
    result.save(target)
    _wrote(out, quiet or not result.main_process)


@p2l_app.command("leaderboard")
def p2l_leaderboard(
    model_dir: P2LModelDir,
    prompts: PromptFile,
    out: Out,
    prompt_column: Annotated[
        Optional[str], typer.Option("--prompt-column", help="Column holding the prompt text.")
    ] = None,
    category_column: Annotated[
        Optional[str],
        typer.Option("--category-column", help="Column with a category per prompt (default: cluster the prompts)."),
    ] = None,
    reference: Annotated[
        Optional[str],
        typer.Option("--reference", help="Model the strengths are measured against (default: the leader)."),
    ] = None,
    aggregation: Annotated[
        AggregationName, typer.Option("--aggregation", help="Per-category aggregation: bt (eq. 3) or mean (B.1).")
    ] = AggregationName.bt,
    cache_dir: CacheDir = None,
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Leaderboards for a prompt set: per prompt, aggregated, per category, and model strengths."""
    inputs = [Input(prompts, Expect.PROMPTS), Input(model_dir, Expect.MODEL_DIR), cache_dir]
    target = _claim(out, "p2l leaderboard", inputs, overwrite, quiet)
    from evalprism.io import read_prompts
    from evalprism.p2l import P2LModel, analyze_prompt_set

    table = read_prompts(prompts, prompt_column)
    model = P2LModel.load(model_dir, cache_dir=cache_dir, progress=not quiet)
    result = analyze_prompt_set(
        model,
        table,
        category_column=category_column,
        reference=reference,
        aggregation=aggregation.value,
        cache_dir=cache_dir,
        progress=not quiet,
    )
    result.save(target)
    _wrote(out, quiet)


RouteValueName = choice_enum("RouteValueName", RouteValueKind)


@p2l_app.command("evaluate")
@harness_options()
def p2l_evaluate(
    model_dir: P2LModelDir,
    battles: Annotated[
        Path,
        typer.Argument(
            help="Held-out battles (prompts not used in training), or graded logs of held-out items (as `p2l train` reads them)."
        ),
    ],
    out: Out,
    *,
    repeats: Annotated[
        int,
        typer.Option(
            "--repeats", help="Random prompt subsets per size (aggregation scaling).", **number_bounds("repeats")
        ),
    ] = 10,
    costs: Annotated[
        Optional[Path],
        typer.Option(
            "--costs",
            help="Cost table (as `p2l route --costs`): value routing policies on the held-out verdicts (P2L router, best single model, marginal router, cost-matched random mix, oracle).",
        ),
    ] = None,
    budgets: Annotated[
        Optional[str],
        typer.Option(
            "--budgets",
            help="With --costs: comma-separated budgets, each prompt's expected cost at most the budget (default: 5 from the cheapest to the dearest model's cost).",
        ),
    ] = None,
    value: Annotated[
        RouteValueName,
        typer.Option(
            "--value",
            help="With --costs: what the routers maximise: score (the default: expected score against a uniform opponent, P(win) + 1/2 P(tie), what the held-out value measures) or own (the model's own routing value, as `p2l route`: sigma(beta) for grk, which saturates near 1).",
        ),
    ] = None,  # type: ignore[assignment]
    cost_column: Annotated[
        Optional[str],
        typer.Option(
            "--cost-column",
            help="Column of --costs holding the cost (default: cost, else the output price of a price list).",
        ),
    ] = None,
    seed: Seed = 0,
    harness: HarnessOptions,
    cache_dir: CacheDir = None,
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Held-out NLL / accuracy / Brier against constant and marginal baselines (NLL split into outcome type and
    winner for rk/grk); with --costs, routing policies valued on the held-out verdicts; aggregation scaling."""
    if value is not None and costs is None:
        raise EvalprismError("--value applies to a routing evaluation: add --costs")
    inputs = [Input(battles, Expect.BATTLES), Input(costs, Expect.TABLE), Input(model_dir, Expect.MODEL_DIR), cache_dir]
    target = _claim(out, "p2l evaluate", inputs, overwrite, quiet)
    from evalprism.io import read_costs
    from evalprism.p2l import evaluate_model_dir
    from evalprism.p2l.from_logs import read_battles_input

    table = read_battles_input(battles, harness=harness)  # the battles first: a bad file fails before the model loads
    cost_table = None if costs is None else read_costs(costs, cost_column)
    result = evaluate_model_dir(
        model_dir,
        table,
        repeats=repeats,
        seed=seed,
        costs=cost_table,
        budgets=_number_list(budgets, "--budgets"),
        value=(value or RouteValueName.score).value,
        cache_dir=cache_dir,
        progress=not quiet,
    )
    _read_notes(result.options.get("read", []), quiet)
    result.save(target)
    _wrote(out, quiet)


BudgetScopeName = choice_enum("BudgetScopeName", BudgetScope, order=("average", "prompt"))


@p2l_app.command("route")
def p2l_route(
    model_dir: P2LModelDir,
    prompts: PromptFile,
    costs: Annotated[
        Path,
        typer.Option(
            "--costs",
            help="Cost table: columns model, cost (cost per query, any unit), or lmarena arena-catalog prices (model_api_name, output_token_price or output_usd_per_1M: the output price is the cost). Extra columns and models are ignored.",
        ),
    ],
    out: Out,
    budget: Annotated[
        Optional[float], typer.Option("--budget", help="Cost limit (default: none, route to each prompt's best model).")
    ] = None,
    opponent: Annotated[str, typer.Option("--opponent", help="uniform, or a model name (point mass).")] = "uniform",
    scope: Annotated[
        BudgetScopeName,
        typer.Option(
            "--budget-scope",
            help="average: the mean expected cost over the prompts stays within the budget; prompt: each prompt's expected cost does (a routing mixes models: an expectation, not a cap on one call).",
        ),
    ] = BudgetScopeName.average,
    prompt_column: Annotated[
        Optional[str], typer.Option("--prompt-column", help="Column holding the prompt text.")
    ] = None,
    cost_column: Annotated[
        Optional[str],
        typer.Option(
            "--cost-column",
            help="Column of --costs holding the cost (default: cost, else the output price of a price list).",
        ),
    ] = None,
    cache_dir: CacheDir = None,
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Optimal cost-constrained routing (Theorem 1) with the router's BT coefficient (Algorithm 1)."""
    inputs = [Input(prompts, Expect.PROMPTS), Input(costs, Expect.TABLE), Input(model_dir, Expect.MODEL_DIR), cache_dir]
    target = _claim(out, "p2l route", inputs, overwrite, quiet)
    from evalprism.io import read_costs, read_prompts
    from evalprism.p2l import route_model_dir

    table = read_prompts(prompts, prompt_column)
    cost_table = read_costs(costs, cost_column)
    result = route_model_dir(
        model_dir,
        table,
        cost_table,
        budget,
        opponent=opponent,
        budget_scope=scope.value,
        cache_dir=cache_dir,
        progress=not quiet,
    )
    result.save(target)
    _wrote(out, quiet)


ReduceName = choice_enum("ReduceName", Reduction)


SelectionName = choice_enum("SelectionName", ClusterSelection)


def _qrels_paths(qrels: Optional[list[str]]) -> list[Path]:
    """The file paths of --qrels [NAME=]PATH values (for the output check)."""
    from evalprism.io import named_qrels

    return [named_qrels(q)[1] for q in qrels or []]


def _number_list(value: Optional[str], option: str) -> Optional[list[float]]:
    """A comma-separated list of numbers (--budgets 0.2,0.5,1), or None when not given."""
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    try:
        return [float(v) for v in items] or None
    except ValueError:
        raise EvalprismError(f"{option} {value!r}: expected comma-separated numbers, e.g. 0.2,0.5,1") from None


def _names(values: Optional[list[str]]) -> list[str]:
    """Repeated options, each possibly a comma-separated list: --llm a,b --llm c -> [a, b, c]."""
    return [v.strip() for item in values or [] for v in item.split(",") if v.strip()]


@app.command()
def judges(
    out: Out,
    judgments: Annotated[
        Optional[Path], typer.Argument(help="Judgments table (.jsonl, .csv, .tsv, .parquet); or use --qrels.")
    ] = None,
    human: Annotated[
        str, typer.Option("--human", help="Human label column (or judge name of a --qrels file).")
    ] = "human",
    llm: Annotated[
        Optional[list[str]], typer.Option("--llm", help="LLM label column(s): repeat, or comma-separated.")
    ] = None,
    instruction: Annotated[
        Optional[list[str]],
        typer.Option("--instruction", help="Candidate task instruction (repeat; the purest clustering wins)."),
    ] = None,
    embedder: Embedder = "minilm",
    qrels: Annotated[
        Optional[list[str]],
        typer.Option("--qrels", help="TREC layout: one qrels file per judge, [NAME=]PATH (name: file name)."),
    ] = None,
    topics: Annotated[Optional[Path], typer.Option("--topics", help="TREC layout: topics file, qid<TAB>query.")] = None,
    passages: Annotated[
        Optional[Path], typer.Option("--passages", help="TREC layout: passage file, docno<TAB>text.")
    ] = None,
    scale: Annotated[
        Optional[list[str]], typer.Option("--scale", help="COL=LOW-HIGH: declared label scale (default 0-3, or 0/1).")
    ] = None,
    threshold: Annotated[
        Optional[list[str]], typer.Option("--threshold", help="COL=T: relevant at label >= T (default 2 on 0-3).")
    ] = None,
    reduce: Annotated[
        ReduceName,
        typer.Option("--reduce", help="Reduction before HDBSCAN (umap needs: pip install 'evalprism[umap]')."),
    ] = ReduceName.pca,
    components: Annotated[
        int, typer.Option("--components", help="Dimensions after reduction.", **number_bounds("n_components"))
    ] = 10,
    min_cluster_size: Annotated[
        Optional[int],
        typer.Option(
            "--min-cluster-size",
            help="HDBSCAN min_cluster_size (default: max(15, pairs/700), per collection).",
            **number_bounds("min_cluster_size"),
        ),
    ] = None,
    min_samples: Annotated[
        int, typer.Option("--min-samples", help="HDBSCAN min_samples.", **number_bounds("min_samples"))
    ] = 5,
    selection: Annotated[
        SelectionName,
        typer.Option(
            "--cluster-selection",
            help="HDBSCAN cluster_selection_method (auto: eom, then leaf if eom is degenerate; leaf: finer clusters).",
        ),
    ] = SelectionName.auto,
    by: Annotated[
        str,
        typer.Option(
            "--by",
            help="Column whose values are clustered apart (auto: 'collection' or 'year' if present; none: pool all pairs).",
        ),
    ] = "auto",
    min_query_pairs: Annotated[
        int,
        typer.Option(
            "--min-query-pairs",
            help="Pairs of a query in a cluster needed for its per-query AC1.",
            **number_bounds("min_query_pairs"),
        ),
    ] = 5,
    tau: Annotated[float, typer.Option("--tau", help="Bias rule 1: ΔAC1 >= tau.")] = 0.5,
    seed: Seed = 0,
    cache_dir: CacheDir = None,
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Judge-agreement bias map: where LLM relevance judges disagree with humans (query-document dense vectors)."""
    inputs = [
        Input(judgments, Expect.TABLE),
        *(Input(path, Expect.QRELS) for path in _qrels_paths(qrels)),
        Input(topics, Expect.TOPICS),
        Input(passages, Expect.PASSAGES),
        cache_dir,
    ]
    target = _claim(out, "judges", inputs, overwrite, quiet)
    from evalprism.io import parse_column_options, read_table, read_trec_judgments
    from evalprism.judges import BiasRules, ClusterOptions, JudgesOptions, analyze

    if qrels:
        if judgments is not None or topics is None or passages is None:
            raise EvalprismError(
                "the TREC layout takes --qrels (one per judge), --topics and --passages, and no JUDGMENTS table"
            )
        table = read_trec_judgments(qrels, topics, passages)
    elif judgments is None:
        raise EvalprismError("give a JUDGMENTS table, or the TREC layout with --qrels, --topics and --passages")
    else:
        table = read_table(judgments)
    options = JudgesOptions(
        instructions=instruction or None,
        embedder=embedder,
        scales=parse_column_options(scale, "scales"),
        thresholds=parse_column_options(threshold, "thresholds"),
        cluster=ClusterOptions(
            reduce=reduce.value,
            n_components=components,
            min_cluster_size=min_cluster_size,
            min_samples=min_samples,
            cluster_selection_method=selection.value,
        ),
        bias=BiasRules(tau=tau),
        min_query_pairs=min_query_pairs,
        by=by,
        seed=seed,
    )
    result = analyze(table, human=human, llm=_names(llm), options=options, cache_dir=cache_dir, progress=not quiet)
    result.save(target)
    flagged = ", ".join(f"{j}: {len(result.bias_prone(j))}" for j in result.options["llm"])
    _wrote(out, quiet, f"; bias-prone queries {flagged}")


stem_app = _group("stem", "STEM (structured transitive evaluation): locate an unknown model on a model family.")


StemMissing = choice_enum("StemMissing", Missing)


StemWeighting = choice_enum("StemWeighting", Weighting)


StemMethod = choice_enum("StemMethod", LocateMethod)


StemDesign = choice_enum("StemDesign", Design)


StemIRT = choice_enum("StemIRT", IRTKind, order=("2pl", "1pl"))


StemCorrectness = Annotated[
    Path,
    typer.Argument(
        help="Correctness: long table (model, item_id, score[, benchmark]), wide model x item matrix, lm-eval --log_samples directory, inspect_ai log (.eval, .json) or a directory of harness output."
    ),
]
StemModels = Annotated[Path, typer.Option("--models", help="Model metadata table: model, params (billions), family.")]
StemFamily = Annotated[
    Optional[str], typer.Option("--family", help="Family to use from the metadata (needed when it lists several).")
]
StemMissingOpt = Annotated[
    StemMissing, typer.Option("--missing", help="A -1 (no answer): count it as wrong, or exclude the item.")
]


def _read_notes(lines: list[str], quiet: bool) -> None:
    """What the harness readers chose, one line each (metric, filter, scorer, epochs per task)."""
    if not quiet:
        for line in lines:
            _err.print(f"[dim]read[/dim] {line}", highlight=False, soft_wrap=True)


def _notes(lines: list[str], quiet: bool) -> None:
    """What the analysis left out or changed from what was asked, one line each."""
    if not quiet:
        for line in lines:
            _err.print(f"[yellow]note[/yellow] {line}", highlight=False, soft_wrap=True)


def _pool_from_files(
    correctness: Path,
    models: Path,
    family: Optional[str],
    missing: StemMissing,
    harness: HarnessOptions,
    quiet: bool,
    **options: Any,
) -> Pool:
    """A family's pool from its files (stem pool, stem audit), with what the readers chose and left out said."""
    from evalprism.stem import build_pool_from_files

    pool = build_pool_from_files(correctness, models, family=family, missing=missing.value, harness=harness, **options)
    _read_notes(pool.options.get("read", []), quiet)
    _notes(pool.options.get("left_out", []), quiet)
    return pool


def _read_answers(path: Path, harness: HarnessOptions, quiet: bool) -> pd.DataFrame:
    """A correctness file of models to locate or plan for (stem locate, stem plan), with the readers' choices said."""
    from evalprism.io import read_correctness

    table = read_correctness(path, harness=harness)
    _read_notes(table.attrs.get("choices", []), quiet)
    return table


@stem_app.command("pool")
@harness_options()
def stem_pool(
    correctness: StemCorrectness,
    models: StemModels,
    out: Annotated[
        Path,
        typer.Option(
            "--out", "-o", help="Pool directory to write (created; see --overwrite).", parser=_out_path, metavar="DIR"
        ),
    ],
    *,
    family: StemFamily = None,
    missing: StemMissingOpt = StemMissing.wrong,
    harness: HarnessOptions,
    panel: Annotated[
        Optional[Path],
        typer.Option(
            "--panel",
            help="Correctness of other models on the same items: the reference panel of the IRT estimator (method irt; auto uses it from 10 panel models with the family).",
            metavar="OTHER_CORRECTNESS",
        ),
    ] = None,
    irt: Annotated[
        Optional[StemIRT],
        typer.Option(
            "--irt",
            help="With --panel: item-response model fitted on the panel: 2pl (default), or 1pl (every discrimination 1).",
        ),
    ] = None,
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Build a family's STS pool: IRVs, transition indices, anomaly rates, discriminability weights."""
    inputs = [Input(correctness, Expect.RESULTS), Input(panel, Expect.RESULTS), Input(models, Expect.TABLE)]
    target = _claim(out, "stem pool", inputs, overwrite, quiet)
    pool = _pool_from_files(
        correctness, models, family, missing, harness, quiet, panel=panel, irt=irt.value if irt else None
    )
    pool.save(target)
    extra = (
        (
            f"; reference panel of {pool.panel_size()} models ({pool.options['irt']} fit in "
            f"{pool.irt_fit().info.get('seconds', 0):.1f} s)"
        )
        if pool.panel is not None
        else ""
    )
    monotone = int((pool.ti > 0).sum())
    _wrote(
        out,
        quiet,
        f"; {len(pool.items):,} pool items over {pool.n} members ({monotone:,} with a monotone IRV, "
        f"{len(pool.items) - monotone:,} anomalous){extra}",
    )


@stem_app.command("locate")
@harness_options()
def stem_locate(
    pool_dir: Annotated[Path, typer.Argument(help="Pool directory from `evalprism stem pool`.")],
    new_correctness: StemCorrectness,
    out: Out,
    *,
    model: Annotated[
        Optional[list[str]],
        typer.Option("--model", help="Model to locate (repeat for several; default: every model in the file)."),
    ] = None,
    items: Annotated[
        Optional[int],
        typer.Option(
            "--items",
            help="Items per localization of a model that answered the whole pool (default 100).",
            **number_bounds("items"),
        ),
    ] = None,
    trials: Annotated[
        int,
        typer.Option(
            "--trials",
            help="Repeated trials of every method, compared with random sampling (0: none).",
            **number_bounds("trials"),
        ),
    ] = 100,
    seed: Annotated[
        Optional[int],
        typer.Option(
            "--seed",
            help="Random seed of the sample drawn from a model that answered the whole pool (default 0).",
            callback=_seed,
        ),
    ] = None,
    method: Annotated[
        StemMethod,
        typer.Option(
            "--method",
            help="auto: irt when the pool has a reference panel of at least 10 models, else stratified; paper: the STEM paper's rule on a balanced subset; stratified: estimator A (strata benchmark x members right); irt: estimator B (random sample + IRT difference estimator).",
        ),
    ] = StemMethod.auto,
    design: Annotated[
        Optional[StemDesign],
        typer.Option(
            "--design",
            help="With a pool that has a reference panel: the IRT estimator's sample: random (simple random sample, the default) or stratified (A's strata).",
        ),
    ] = None,
    weighting: Annotated[
        Optional[StemWeighting],
        typer.Option(
            "--weighting",
            help="The paper's rule: balanced (the default): every TI level counts the same (paper); stratified: each level by its size in the pool.",
        ),
    ] = None,
    harness: HarnessOptions,
    plan: Annotated[
        Path | None,
        typer.Option(
            "--plan",
            help="Plan directory from `evalprism stem plan`: estimate the full-pool score from the planned items by the plan's design weights (without it, answers on part of the pool are taken as a simple random sample of the pool).",
            metavar="PLAN_DIR",
        ),
    ] = None,
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Locate new models on the pool's family: from their answers on the whole pool (with trials against the truth)
    or on part of it (a plan's items, or any subset: an estimate of the full-pool score)."""
    inputs = [Input(pool_dir, Expect.POOL_DIR), Input(plan, Expect.PLAN_DIR), Input(new_correctness, Expect.RESULTS)]
    target = _claim(out, "stem locate", inputs, overwrite, quiet)
    from evalprism.stem import Plan, Pool, locate_models

    pool = Pool.load(pool_dir)
    the_plan = Plan.load(plan) if plan is not None else None
    table = _read_answers(new_correctness, harness, quiet)
    result = locate_models(
        pool,
        table,
        model,
        items=items,
        trials=trials,
        seed=seed,
        weighting=weighting.value if weighting else None,
        method=method.value,
        design=design.value if design else None,
        plan=the_plan,
        progress=not quiet,
    )
    _notes(result.options.get("notes", []), quiet)
    result.save(target)
    _wrote(out, quiet)


StemPlanMethod = choice_enum("StemPlanMethod", PlanMethod)


@stem_app.command("plan")
@harness_options()
def stem_plan(
    pool_dir: Annotated[Path, typer.Argument(help="Pool directory from `evalprism stem pool`.")],
    out: Annotated[
        Path,
        typer.Option(
            "--out", "-o", help="Plan directory to write (created; see --overwrite).", parser=_out_path, metavar="PLAN"
        ),
    ],
    *,
    items: Annotated[
        int,
        typer.Option(
            "--items",
            help="Items to run the new model on (with --plan: the new stage's items).",
            **number_bounds("items"),
        ),
    ] = 100,
    seed: Annotated[
        Optional[int],
        typer.Option(
            "--seed", help="Random seed (default 0; a later stage carries on its plan's seed).", callback=_seed
        ),
    ] = None,
    method: Annotated[
        Optional[StemPlanMethod],
        typer.Option(
            "--method",
            help="Estimator the answers will be read with: auto (the default: irt when the pool has a reference panel of at least 10 models, else stratified), stratified (A) or irt (B); both draw the same stratified sample (benchmark x members right). adaptive: stage 1 of an adaptive plan (the same draw); later stages with --plan and --answers.",
        ),
    ] = None,
    previous: Annotated[
        Optional[Path],
        typer.Option(
            "--plan",
            help="An adaptive plan (stages 1..K) to extend by stage K+1, picked from the model's --answers on its items.",
            metavar="PLAN_DIR",
        ),
    ] = None,
    stage: Annotated[
        Optional[int],
        typer.Option(
            "--stage",
            help="With --plan: the stage to plan (checked: one more than the plan's last stage).",
            **number_bounds("stage"),
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
    model: Annotated[
        Optional[str],
        typer.Option("--model", help="With --answers: the model to plan for (default: the only model in the file)."),
    ] = None,
    target_confidence: Annotated[
        Optional[float],
        typer.Option(
            "--target-confidence",
            help="With --plan: add no item when the localization so far already has this confidence (e.g. 0.95).",
        ),
    ] = None,
    harness: HarnessOptions,
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Which pool items to run a new model on: plan.csv (stratum, inclusion probability, design weight, stage), and
    the lists lm-evaluation-harness (--samples) and inspect_ai (--sample-id) take. Deterministic in (pool, items, seed);
    an adaptive plan's later stages also in the model's answers."""
    inputs = [Input(pool_dir, Expect.POOL_DIR), Input(previous, Expect.PLAN_DIR), Input(answers, Expect.RESULTS)]
    target = _claim(out, "stem plan", inputs, overwrite, quiet)
    from evalprism.stem import Plan, Pool, plan_stage

    pool = Pool.load(pool_dir)
    prior = Plan.load(previous) if previous is not None else None
    table = None
    if answers is not None:
        table = _read_answers(answers, harness, quiet)
    plan, _current = plan_stage(
        pool,
        items=items,
        seed=seed,
        method=method.value if method else None,
        previous=prior,
        answers=table,
        model=model,
        stage=stage,
        target_confidence=target_confidence,
        progress=not quiet,
    )
    plan.save(target)
    if "stopped" in plan.options:
        _notes([plan.options["stopped"]], quiet)
    _wrote(
        out,
        quiet,
        f"; {len(plan.items)} of {plan.options['pool_items']} pool items, {plan.options['strata']} strata"
        + (f", stage {plan.options['stage']}" if plan.options.get("method") == "adaptive" else ""),
    )


@stem_app.command("audit")
@harness_options()
def stem_audit(
    correctness: StemCorrectness,
    models: StemModels,
    out: Out,
    *,
    family: StemFamily = None,
    missing: StemMissingOpt = StemMissing.wrong,
    harness: HarnessOptions,
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Contamination audit: anomaly rate per benchmark and every non-monotone item over the family."""
    inputs = [Input(correctness, Expect.RESULTS), Input(models, Expect.TABLE)]
    target = _claim(out, "stem audit", inputs, overwrite, quiet)
    pool = _pool_from_files(correctness, models, family, missing, harness, quiet, require_sts=False)
    pool.audit().save(target)
    _wrote(out, quiet)


CompareAdjust = choice_enum("CompareAdjust", Adjustment)


CompareModelName = Annotated[
    Optional[list[str]],
    typer.Option(
        "--model-name",
        help="Name a run: RUN=NAME (a RUN argument as given, or its last path component), or an lm-eval run directory inside a RUN (repeat).",
        metavar="KEY=NAME",
    ),
]
CompareEpochs = Annotated[
    HarnessEpochsChoice,
    typer.Option(
        "--epochs",
        help="inspect_ai samples run several epochs: mean (inspect's reduction; must be 0 or 1), first, or all (each epoch one sample of its item: the within-item variance is reported).",
    ),
]


@app.command()
@harness_options(model_name=CompareModelName, epochs=CompareEpochs)
def compare(
    runs: Annotated[
        list[Path],
        typer.Argument(
            help="Two or more runs: lm-eval --log_samples directories, inspect_ai logs, score tables (model, item_id, score in 0..1[, benchmark][, cluster columns]; repeated rows = several samples of an item), or ECDF responses files (one run per --by configuration, each response a sample of its question). A model name is a run: a file holding several models gives several runs.",
            metavar="RUN",
        ),
    ],
    out: Out,
    *,
    baseline: Annotated[
        Optional[str],
        typer.Option(
            "--baseline", help="Compare every run with this one (a model name) instead of all pairs.", metavar="NAME"
        ),
    ] = None,
    cluster: Annotated[
        Optional[str],
        typer.Option(
            "--cluster",
            help="Column grouping items that are not independent (passage, template, question group): cluster-robust (CR1) standard errors and cluster sign-flips.",
            metavar="COL",
        ),
    ] = None,
    adjust: Annotated[
        CompareAdjust,
        typer.Option("--adjust", help="Multiple-comparison correction across pairs: bh (Benjamini-Hochberg) or holm."),
    ] = CompareAdjust.bh,
    permutations: Annotated[
        int, typer.Option("--permutations", help="Sign flips per permutation test (scores not 0/1, or clustered).")
    ] = 9999,
    effect: Annotated[
        float,
        typer.Option("--effect", help="Difference (0..1 scale) whose items_needed is reported (0.02 = 2 points)."),
    ] = 0.02,
    seed: Seed = 0,
    harness: HarnessOptions,
    by: Annotated[
        Optional[list[str]],
        typer.Option(
            "--by", help="ECDF responses files: the setting columns that make a run (repeat; default: model)."
        ),
    ] = None,
    score: Annotated[
        ScoreRuleName,
        typer.Option(
            "--score",
            help="ECDF responses files with references: exact (normalised, numbers as numbers) or contains; a 'score' column in 0..1 is used as it is.",
        ),
    ] = ScoreRuleName.exact,
    extract: Extract = None,
    choices: Choices = None,
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Is B better than A? Paired, clustered, corrected comparison of runs on the items both answered."""
    target = _claim(out, "compare", [Input(run, Expect.RESULTS) for run in runs], overwrite, quiet)
    from evalprism.compare import ResponseOptions, compare_runs

    result = compare_runs(
        runs,
        baseline=baseline,
        cluster=cluster,
        harness=harness,
        adjust=adjust.value,
        permutations=permutations,
        seed=seed,
        effect=effect,
        responses=ResponseOptions(tuple(by or ()), score.value, extract, choices),
    )
    _read_notes(result.read, quiet)
    _notes(result.notes, quiet)
    result.save(target)
    if not quiet:
        for _, r in result.overall().iterrows():
            _err.print(f"{r['run_b']} vs {r['run_a']}: {r['verdict']}", highlight=False, soft_wrap=True)
    _wrote(out, quiet)


@app.command()
def demo(
    out: Annotated[
        Path,
        typer.Option(
            "--out", "-o", help="Output directory (created; see --overwrite).", parser=_out_path, metavar="DIR"
        ),
    ] = Path("evalprism-demo"),
    cache_dir: CacheDir = None,
    overwrite: Overwrite = False,
    quiet: Quiet = False,
) -> None:
    """Run every analysis on the packaged demo data and write an index page."""
    target = _claim(out, "demo", [cache_dir], overwrite, quiet)
    from evalprism.demo import run_demo

    index = run_demo(target, cache_dir=str(cache_dir) if cache_dir else None, progress=not quiet)
    if not quiet:
        _err.print(f"[green]open[/green] {index}", highlight=False)


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(__version__)


@app.command()
def serve(
    model_dir: P2LModelDir,
    config: Annotated[
        Path, typer.Option("--config", help="Router config (YAML): candidates, costs, budget, opponent, API keys.")
    ],
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on; other than loopback only with API keys.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on.")] = 8000,
    decision_log: Annotated[
        Optional[Path],
        typer.Option(
            "--decision-log", help="JSONL decision log (default: the config's decision_log, next to the config)."
        ),
    ] = None,
    log_level: Annotated[
        str, typer.Option("--log-level", help="uvicorn log level: critical, error, warning, info, debug.")
    ] = "info",
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No status lines, and uvicorn logs warnings only.")
    ] = False,
) -> None:
    """Run the P2L router: an OpenAI-compatible service that routes each prompt to its best candidate."""
    check_inputs([Input(config, Expect.TEXT), Input(model_dir, Expect.MODEL_DIR)])
    from evalprism.serve import serve as run_service

    run_service(
        model_dir,
        config,
        host=host,
        port=port,
        decision_log=decision_log,
        log_level="warning" if quiet else log_level,
        progress=not quiet,
    )


#: library parameters whose flag is not "--" + the name with "-" for "_"
FLAG_OF_PARAMETER = {
    "n_components": "--components",
    "max_epochs": "--epochs",
    "filter": "--lm-eval-filter",
    "scales": "--scale",
    "thresholds": "--threshold",
    "cluster_selection_method": "--cluster-selection",
}


def flag_of(parameter: str) -> str:
    """The command-line flag of a library parameter (library messages name parameters, the CLI shows flags)."""
    return FLAG_OF_PARAMETER.get(parameter, "--" + parameter.replace("_", "-"))


def main() -> None:
    """Console entry point: user errors become one message and exit code 2, never a traceback; the
    process then exits without collecting the run's objects again (evalprism.shutdown)."""
    skip_exit_collections()
    try:
        app()
    except EvalprismError as exc:
        message = exc.naming(flag_of(exc.parameter)) if exc.parameter else str(exc)
        _err.print(f"[bold red]error:[/bold red] {message}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        _err.print("[yellow]interrupted[/yellow]")
        sys.exit(130)


if __name__ == "__main__":
    main()
