"""The options of every P2L command, declared once (:mod:`evalprism.io.options`): the marginal fit, the
split, training, prompt-set leaderboards, held-out evaluation and routing.

Training's options keep their rules here too (:meth:`TrainOptions.resolved`: which options the chosen
fit reads, the epoch loop's defaults). Importing this module imports neither numpy nor torch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from evalprism.errors import EvalprismError
from evalprism.io.embed_options import EMBEDDER_HELP, EmbedOptions, EngineOptions
from evalprism.io.harness_options import HarnessOptions
from evalprism.io.options import Options, check_applies, group, option
from evalprism.vocabularies import (
    Aggregation,
    BenchUnit,
    BudgetScope,
    CiMethod,
    HeadFit,
    OutcomeModelName,
    Precision,
    RouteValueKind,
)

_OUTCOME_MODEL_HELP = "Outcome model of a battle"

#: the epoch loop's flag is --epochs: the inspect_ai reader's epochs option is --log-epochs in `p2l train`
LOG_EPOCHS = {
    "flags": ("--log-epochs",),
    "help": "inspect_ai logs whose samples ran several epochs: mean (inspect's reduction; must be 0 or 1), first, "
    "or all (each epoch its own item).",
}


@dataclass(frozen=True)
class FitOptions(Options):
    """How :func:`evalprism.p2l.fit_leaderboard` fits a marginal leaderboard: the outcome model, the
    95% intervals (``rounds``: bootstrap rounds, only with ``ci="bootstrap"``), the seed, and how graded
    logs are read as battles."""

    outcome_model: OutcomeModelName = option(
        "bt", flags=("--outcome-model", "--model"), help=f"{_OUTCOME_MODEL_HELP} (--model: its older name)."
    )
    ci: CiMethod | None = option("sandwich", help="95% interval method.")
    rounds: int | None = option(None, help="With --ci bootstrap: bootstrap rounds (default 100).")
    seed: int = option(0, help="Random seed.")
    harness: HarnessOptions = group(HarnessOptions)

    def check(self) -> None:
        check_applies(
            "rounds",
            self.rounds,
            self.ci == "bootstrap",
            f"only ci='bootstrap' resamples the battles (the intervals here: {self.ci or 'none'})",
        )


@dataclass(frozen=True)
class SplitOptions(Options):
    """How :func:`evalprism.p2l.split_battles` splits battles by prompt: training's own rule, so
    ``test_fraction`` F and ``seed`` S hold out the prompts `p2l train --val-fraction F --seed S`
    validates on."""

    test_fraction: float = option(0.2, help="Share of prompts held out for testing.")
    seed: int = option(0, help="Random seed (a prompt's side: a hash of its text and the seed).")
    harness: HarnessOptions = group(HarnessOptions)


@dataclass(frozen=True)
class EpochSchedule:
    """The epoch loop's settings (fit ``adamw``), every one set: what the loop and the optimiser read.
    :meth:`of` fills the defaults where the options leave None, the one place they are written."""

    max_epochs: int
    batch_size: int  # battles per optimiser step (the global batch)
    lr: float  # the head's learning rate
    weight_decay: float  # on the head's weights, not the bias
    patience: int  # epochs without a better validation NLL before stopping

    @classmethod
    def of(cls, options: TrainOptions) -> EpochSchedule:
        """The schedule of ``options``: a frozen backbone 200 epochs of 1,024 battles, a fine-tuned one
        3 epochs of 16; lr 3e-3, weight decay 1e-2, patience 8."""
        return cls(
            max_epochs=options.max_epochs or (3 if options.finetune else 200),
            batch_size=options.batch_size or (16 if options.finetune else 1024),
            lr=DEFAULT_LR if options.lr is None else options.lr,
            weight_decay=1e-2 if options.weight_decay is None else options.weight_decay,
            patience=8 if options.patience is None else options.patience,
        )


#: the head's learning rate in the epoch loop unless given
DEFAULT_LR = 3e-3
#: options that only the epoch loop reads: given with fit 'ridge', they are refused rather than ignored
EPOCH_ONLY = ("lr", "weight_decay", "patience", "max_epochs", "batch_size", "micro_batch_size")


#: TrainOptions' groups that say how the battles were read and where the prompts were encoded, not how
#: the model was trained: neither in the model's config.json nor in what a resumed run must match
HOW_READ = ("harness", "encoding")


@dataclass(frozen=True)
class TrainOptions(Options):
    """Options of one training run (:func:`evalprism.p2l.train_model`); None means the default for the
    backbone kind and fit (:meth:`resolved` decides it)."""

    backbone: str = option(
        "minilm",
        help="The model's prompt encoder, saved with it and trainable with --finetune (unlike --embedder of "
        "ecdf/judges, which is a frozen feature extractor): minilm | st:<local dir> | hf:<local causal LM dir> | "
        "static (distilled from MiniLM once into the cache, ~0.3 ms per prompt; static:<local encoder dir> "
        "distils another encoder).",
    )
    outcome_model: OutcomeModelName = option(
        "bt",
        flags=("--outcome-model", "--loss"),
        help="Outcome model of the head's battles (--loss: its older name).",
    )
    finetune: bool = option(False, help="Train the backbone too (slow on CPU; runs under torchrun on many GPUs).")
    fit: HeadFit | None = option(
        None,
        help="How the head is fitted: ridge (the default with a frozen backbone: to convergence, the penalty "
        "chosen by cross-validation over training prompts) | adamw (epochs with early stopping; always with "
        "--finetune).",
    )
    penalty: float | None = option(
        None,
        help="With --fit ridge: the penalty λ on the head's weights (default: chosen by 5-fold cross-validation).",
    )
    val_fraction: float = option(0.1, help="Share of prompts held out for validation.")
    max_epochs: int | None = option(
        None, flags="--epochs", help="With --fit adamw: maximum epochs (default 200 frozen, 3 fine-tuning)."
    )
    batch_size: int | None = option(
        None,
        help="With --fit adamw: battles per optimiser step, over all processes of a torchrun world (default 1024 "
        "frozen, 16 fine-tuning).",
    )
    lr: float | None = option(None, help="With --fit adamw: learning rate of the head (default 3e-3).")
    backbone_lr: float = option(2e-5, help="With --finetune: learning rate of the backbone.")
    weight_decay: float | None = option(
        None, help="With --fit adamw: AdamW weight decay on the head's weights, not its bias (default 1e-2)."
    )
    patience: int | None = option(
        None, help="With --fit adamw: epochs without validation improvement before stopping (default 8)."
    )
    seed: int = option(0, help="Random seed (split, order, initialisation).")
    micro_batch_size: int | None = option(
        None,
        help="With --fit adamw: battles per forward pass and process; gradients accumulate up to --batch-size "
        "(default: a process's whole share).",
    )
    gradient_checkpointing: bool = option(
        False,
        help="With --finetune: recompute activations in the backward pass (less memory for large backbones, slower).",
    )
    precision: Precision | None = option(
        None,
        help="With --finetune: auto (the default: bfloat16 autocast on GPUs that support it, else float32) | "
        "float32 | bfloat16.",
    )
    max_length: int | None = option(
        None,
        help="With --finetune: longest prompt read, in tokens (saved with the model; default the backbone's own, "
        "1024 for hf:).",
    )
    harness: HarnessOptions = group(HarnessOptions, epochs=LOG_EPOCHS)
    #: where a frozen sentence-encoder backbone pre-encodes the prompts (--engine ray: a Ray actor pool)
    encoding: EngineOptions = group(EngineOptions)

    def check(self) -> None:
        """Options the chosen fit would ignore are refused (a ridge fit has no epochs)."""
        check_applies(
            "engine",
            "ray" if self.encoding.engine == "ray" else None,
            not self.finetune,
            "it pre-encodes the prompts of a frozen backbone (a fine-tuned one encodes every batch with gradients)",
        )
        fit = self.fit or ("adamw" if self.finetune else "ridge")
        if fit == "ridge" and self.finetune:
            raise EvalprismError(
                "fit 'ridge' needs frozen features: a fine-tuned backbone trains with fit 'adamw'", parameter="fit"
            )
        for name in EPOCH_ONLY:
            if fit == "ridge" and getattr(self, name) is not None:
                raise EvalprismError(
                    f"{name} applies to the epoch loop (fit 'adamw'); a frozen backbone's head is "
                    "fitted by ridge by default: drop it, or choose fit 'adamw'",
                    parameter=name,
                )
        if fit == "adamw" and self.penalty is not None:
            raise EvalprismError(
                "penalty applies to fit 'ridge' (adamw's counterpart is weight_decay)", parameter="penalty"
            )
        check_applies(
            "precision",
            self.precision,
            self.finetune,
            "it sets the dtype of a fine-tuned backbone's "
            "training (a frozen backbone's features are computed once, in float32)",
        )
        if not self.finetune and (self.max_length is not None or self.gradient_checkpointing):
            raise EvalprismError(
                "max_length and gradient_checkpointing apply to a fine-tuned backbone: add finetune "
                "(a frozen backbone reads prompts as it does at inference)",
                parameter="finetune",
            )

    def resolved(self) -> ResolvedTrainOptions:
        """A copy with the defaults filled in (:class:`ResolvedTrainOptions`): the fit and the precision
        decided, and with fit ``adamw`` the epoch loop's settings as the loop runs them (recorded in
        run.json)."""
        fit: HeadFit = self.fit or ("adamw" if self.finetune else "ridge")
        filled: dict[str, Any] = {**self.fields(), "fit": fit, "precision": self.precision or "auto"}
        if fit == "adamw":
            filled.update(asdict(EpochSchedule.of(self)))
        return ResolvedTrainOptions(**filled)

    def fields(self) -> dict[str, object]:
        """The fields as keywords (the harness options as their object)."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    def training_record(self) -> dict[str, object]:
        """How the model was trained, as its ``config.json`` keeps it: every field but those of
        :data:`HOW_READ` (which the run record keeps)."""
        return {name: value for name, value in self.fields().items() if name not in HOW_READ}


@dataclass(frozen=True)
class ResolvedTrainOptions(TrainOptions):
    """:class:`TrainOptions` after :meth:`~TrainOptions.resolved`: the fit and the precision decided,
    and with fit ``adamw`` the epoch loop's settings filled (:attr:`schedule`). What training reads
    and ``run.json`` records."""

    fit: HeadFit = option("ridge", shown=False)
    precision: Precision = option("auto", shown=False)

    def check(self) -> None:
        """Checked before resolution; a resolved fit ``adamw`` carries the loop's settings."""

    @property
    def schedule(self) -> EpochSchedule:
        """The epoch loop's settings (fit ``adamw``; a ridge fit has no epochs)."""
        return EpochSchedule.of(self)


@dataclass(frozen=True)
class PromptSetOptions(Options):
    """How :func:`evalprism.p2l.analyze_prompt_set` reads and aggregates a prompt set: the prompt and
    category columns (default: the prompt column found by name, and categories by clustering the
    prompts), the strengths' reference model (default: the leader) and the aggregation."""

    prompt_column: str | None = option(None, help="Column holding the prompt text.")
    category_column: str | None = option(None, help="Column with a category per prompt (default: cluster the prompts).")
    reference: str | None = option(None, help="Model the strengths are measured against (default: the leader).")
    aggregation: Aggregation = option("bt", help="Per-category aggregation: bt (eq. 3) or mean (B.1).")
    min_cluster_size: int | None = option(None, shown=False)


def number_list(value: object, name: str) -> tuple[float, ...] | None:
    """A comma-separated list of numbers (``0.2,0.5,1``), or numbers as they are; None when not given."""
    if value is None:
        return None
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",") if v.strip()]
        try:
            return tuple(float(v) for v in items) or None
        except ValueError:
            raise EvalprismError(
                f"{name} {value!r}: expected comma-separated numbers, e.g. 0.2,0.5,1", parameter=name
            ) from None
    return tuple(float(v) for v in value)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class EvaluateOptions(Options):
    """How :func:`evalprism.p2l.evaluate_model_dir` scores a P2L model on held-out battles: random
    prompt subsets per size for the aggregation scaling, and with costs the routing policies' budgets
    and the value they maximise."""

    repeats: int = option(10, help="Random prompt subsets per size (aggregation scaling).")
    budgets: tuple[float, ...] | None = option(
        None,
        help="With --costs: comma-separated budgets, each prompt's expected cost at most the budget (default: 5 "
        "from the cheapest to the dearest model's cost).",
        parse=number_list,
        cli=str,
    )
    value: RouteValueKind | None = option(
        None,
        help="With --costs: what the routers maximise: score (the default: expected score against a uniform "
        "opponent, P(win) + 1/2 P(tie), what the held-out value measures) or own (the model's own routing value, "
        "as `p2l route`: sigma(beta) for grk, which saturates near 1).",
    )
    cost_column: str | None = option(
        None, help="Column of --costs holding the cost (default: cost, else the output price of a price list)."
    )
    seed: int = option(0, help="Random seed.")
    harness: HarnessOptions = group(HarnessOptions)

    def check_costs(self, given: bool) -> None:
        """``value`` chooses what the routers maximise: it applies only when costs are given."""
        check_applies("value", self.value, given, "it chooses what the routers maximise: add costs")


@dataclass(frozen=True)
class RouteOptions(Options):
    """How :func:`evalprism.p2l.route_model_dir` routes a prompt set (Theorem 1, Algorithm 1)."""

    budget: float | None = option(None, help="Cost limit (default: none, route to each prompt's best model).")
    opponent: str = option("uniform", help="uniform, or a model name (point mass).")
    budget_scope: BudgetScope = option(
        "average",
        flags="--budget-scope",
        help="average: the mean expected cost over the prompts stays within the budget; prompt: each prompt's "
        "expected cost does (a routing mixes models: an expectation, not a cap on one call).",
        order=("average", "prompt"),
    )
    prompt_column: str | None = option(None, help="Column holding the prompt text.")
    cost_column: str | None = option(
        None, help="Column of --costs holding the cost (default: cost, else the output price of a price list)."
    )


@dataclass(frozen=True)
class BenchOptions(Options):
    """How :func:`evalprism.p2l.bench.bench_routers` benchmarks routers on graded items: the budgets
    (each item's expected cost at most the budget), the cost column of the costs table, the prompt
    embedder of the baselines, the bootstrap rounds of the AIQ intervals and the seed."""

    budgets: tuple[float, ...] | None = option(
        None,
        help="Comma-separated budgets, each item's expected cost at most the budget (default: 5 from the cheapest "
        "to the dearest model's cost).",
        parse=number_list,
        cli=str,
    )
    cost_column: str | None = option(
        None, help="Column of --costs holding the cost (default: cost, else the output price of a price list)."
    )
    embedding: EmbedOptions = group(
        EmbedOptions,
        embedder={
            "help": "Prompt embedder of the baselines (kNN, MLP, mf): "
            + EMBEDDER_HELP.removeprefix("Frozen text encoder: ")
        },
    )
    rounds: int = option(1000, number="repeats", help="Bootstrap rounds (by --se-by unit) of the AIQ intervals.")
    se_by: BenchUnit = option(
        "prompt",
        help="The unit the SEs, intervals and AIQ bootstrap are clustered by: prompt (items sharing a prompt are one "
        "unit), or benchmark (each benchmark one unit: a claim about benchmarks like these; wide with few of them).",
    )
    seed: int = option(0, help="Random seed (cross-validation folds, MLP and mf initialisation, bootstrap).")
    harness: HarnessOptions = group(HarnessOptions)
