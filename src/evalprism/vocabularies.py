"""Option vocabularies, each declared once: the allowed values of every enumerated option.

Each vocabulary is a ``Literal`` type. The library annotates its parameters with it, checks values
with :func:`evalprism.io.options.check_choice` (which names the allowed values from it), and the
command line builds its choices from it (:func:`choice_enum`): a value added here reaches the three at
once. The anchor is scikit-learn's ``_parameter_constraints`` (one declaration per parameter, checks
and messages derived). Importing this module imports nothing heavy, so ``evalprism --help`` stays fast.

Numeric options likewise: :data:`NUMBERS` declares each one's :class:`Bounds` once, keyed by the
library parameter's name; :func:`evalprism.io.options.check_number` checks a value against it and
words the message from it, and the command line shows it in each flag's help.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal, get_args

#: k-medoids algorithm (`ecdf --method`)
KMedoidsMethod = Literal["fasterpam", "pam"]
#: a setting's final answer: eq. 6's medoid, or the self-consistency vote (`ecdf --final`)
FinalRule = Literal["medoid", "majority"]
#: a response's quality against its references (`ecdf --score`, `compare --score`)
ScoreRule = Literal["cosine", "exact", "contains"]
#: pairwise outcome models (the registry of :mod:`evalprism.stats.outcome_models`; `p2l train`/`p2l fit` `--outcome-model`)
OutcomeModelName = Literal["bt", "bt-tie", "rk", "grk"]
#: how a P2L head is fitted: ridge to convergence (a frozen backbone's default) or the AdamW epoch loop
#: (`p2l train --fit`)
HeadFit = Literal["ridge", "adamw"]
#: the precision a user asks a backbone to compute in; auto is bfloat16 where the hardware computes it
#: natively (a GPU's autocast in training, an AMX/AVX512-BF16 CPU in the service), else float32
#: (`p2l train --precision`, the service's ``precision``)
Precision = Literal["auto", "float32", "bfloat16"]
#: the precision a backbone computes in once auto is decided (:meth:`evalprism.p2l.P2LModel.load`'s ``precision``)
ComputePrecision = Literal["float32", "bfloat16"]
#: what computes a sentence encoder's vectors: PyTorch or OpenVINO; auto picks OpenVINO where it applies and is
#: installed (a P2L backbone's `runtime`, and the analyses' `--embed-runtime`)
Runtime = Literal["auto", "torch", "openvino"]
#: where texts missing from the embedding cache are encoded: in this process, or through Ray Data's actor
#: pool on a local instance or a cluster (`--engine`, in every command that embeds)
EmbedEngine = Literal["local", "ray"]
#: confidence intervals of a marginal leaderboard (`p2l fit --ci`)
CiMethod = Literal["sandwich", "bootstrap"]
#: aggregating per-prompt leaderboards over a prompt set (`p2l leaderboard --aggregation`)
Aggregation = Literal["bt", "mean"]
#: how the router values a model's coefficients: BT win rate, or grk's σ(β) (an outcome model's
#: ``route_by``; :func:`evalprism.p2l.route`'s ``value``)
RouteValue = Literal["bt", "grk"]
#: the routing value a held-out router evaluation uses (`p2l evaluate --value`)
RouteValueKind = Literal["score", "own"]
#: where a routing budget holds: on average over prompts, or on every prompt (`--budget-scope`)
BudgetScope = Literal["prompt", "average"]
#: what a router benchmark's standard errors are clustered by (`p2l bench --se-by`)
BenchUnit = Literal["prompt", "benchmark"]
#: dimension reduction before HDBSCAN (`judges --reduce`)
Reduction = Literal["none", "pca", "umap"]
#: HDBSCAN's cluster selection (`judges --selection`)
ClusterSelection = Literal["auto", "eom", "leaf"]
#: what a -1 (no answer) counts as in STEM (`--missing`)
Missing = Literal["wrong", "exclude"]
#: STEM's per-level weighting (`stem locate --weighting`)
Weighting = Literal["balanced", "stratified"]
#: STEM localization method (`stem locate --method`)
LocateMethod = Literal["auto", "paper", "stratified", "irt"]
#: the IRT estimator's sample design (`stem locate --design`)
Design = Literal["random", "stratified"]
#: inspect_ai samples over several epochs (`--epochs`)
Epochs = Literal["first", "mean", "all"]
#: the item-response model of a STEM reference panel (`stem pool --irt`)
IRTKind = Literal["2pl", "1pl"]
#: how `stem plan` chooses items (`stem plan --method`)
PlanMethod = Literal["auto", "stratified", "irt", "adaptive"]
#: multiple-comparison correction across pairs (`compare --adjust`)
Adjustment = Literal["bh", "holm"]
#: uvicorn's log levels (`serve --log-level`)
LogLevel = Literal["critical", "error", "warning", "info", "debug", "trace"]


def choices(vocabulary: Any) -> tuple[str, ...]:
    """The values of a vocabulary, in their declared order."""
    return tuple(get_args(vocabulary))


def choice_enum(name: str, vocabulary: Any, order: tuple[str, ...] | None = None) -> Any:
    """A ``str`` Enum of the vocabulary for the command line's choices (typer lists Enum values);
    members are named after their values made identifiers (``bt-tie`` -> ``bt_tie``, ``2pl`` ->
    ``_2pl``) and looked up by value (``Enum("bt")``). ``order``: the help's order, the same values."""
    values = order if order is not None else choices(vocabulary)
    assert sorted(values) == sorted(choices(vocabulary)), f"{name}: the order must list the vocabulary"
    members = [(("_" + v if v[0].isdigit() else v).replace("-", "_"), v) for v in values]
    return Enum(name, members, type=str)  # a functional Enum: members known at run time


@dataclass(frozen=True)
class Bounds:
    """The values a numeric option takes: a finite number (``integer``: a whole number) from ``low``
    to ``high`` (None: unbounded at that end), an end excluded when ``low_open``/``high_open``."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    integer: bool = False

    def expected(self) -> str:
        """What a value must be, in words: ``a whole number >= 2``, ``a finite number > 0 and < 1``,
        ``a whole number from 0 to 4294967295`` (both ends included)."""
        kind = "a whole number" if self.integer else "a finite number"
        if self.low is not None and self.high is not None and not (self.low_open or self.high_open):
            return f"{kind} from {_number(self.low)} to {_number(self.high)}"
        ends = []
        if self.low is not None:
            ends.append(f"{'>' if self.low_open else '>='} {_number(self.low)}")
        if self.high is not None:
            ends.append(f"{'<' if self.high_open else '<='} {_number(self.high)}")
        return kind + (" " + " and ".join(ends) if ends else "")

    def admits(self, x: float) -> bool:
        """Whether the finite float ``x`` lies within the bounds (and is whole when ``integer``)."""
        return (
            (not self.integer or x.is_integer())
            and (self.low is None or (x > self.low if self.low_open else x >= self.low))
            and (self.high is None or (x < self.high if self.high_open else x <= self.high))
        )


def _number(x: float) -> str:
    """A bound as written: whole numbers in full (``4294967295``, not ``4.29497e+09``)."""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


#: the largest seed: numpy's and scikit-learn's ``random_state`` take 0 .. 2**32 - 1
MAX_SEED = 2**32 - 1

_COUNT = Bounds(1, integer=True)
_OPEN_FRACTION = Bounds(0, 1, low_open=True, high_open=True)

#: every numeric option's bounds, keyed by its library parameter (the CLI flag: ``evalprism.cli.flag_of``)
NUMBERS: dict[str, Bounds] = {
    # every random generator (numpy refuses a negative seed, scikit-learn one above 2**32 - 1)
    "seed": Bounds(0, MAX_SEED, integer=True),
    # judges, bias rules: rule 1's ΔAC1 threshold, a max - min of AC1 values in [-1, 1]
    "tau": Bounds(0, 2),
    # rule 2's outlier fence in interquartile ranges; a negative k would flag the middle of the spread
    "iqr_k": Bounds(0),
    # rule 3's lower AC1 (an AC1 lies in [-1, 1])
    "flip_low": Bounds(-1, 1),
    # rule 3's upper AC1; its low end is flip_low itself, given at the check
    "flip_high": Bounds(-1, 1, low_open=True),
    # judges, clustering: dimensions after PCA/UMAP; one is a valid reduction (the most, pairs - 1, is checked with the data)
    "n_components": _COUNT,
    # HDBSCAN's min_cluster_size: one pair is no cluster (HDBSCAN refuses 1)
    "min_cluster_size": Bounds(2, integer=True),
    # HDBSCAN's min_samples: neighbours of a core pair, the pair itself counted
    "min_samples": _COUNT,
    # HDBSCAN's cluster_selection_epsilon: a distance
    "cluster_selection_epsilon": Bounds(0),
    # UMAP's n_neighbors: UMAP needs at least 2
    "umap_neighbors": Bounds(2, integer=True),
    # a clustering is degenerate above this largest-cluster share; 0 would call every clustering degenerate
    "max_cluster_share": Bounds(0, 1, low_open=True),
    # a clustering is degenerate with fewer clusters than this
    "min_clusters": _COUNT,
    # a clustering is degenerate when fewer queries than this share have pairs in two clusters
    "min_query_share": Bounds(0, 1),
    # pairs of a query in a cluster needed for its per-query AC1: one pair has no agreement to measure
    "min_query_pairs": Bounds(2, integer=True),
    # the percentile of cluster purity reported; the 0th is no percentile of the clusters
    "purity_percentile": Bounds(0, 100, low_open=True),
    # the level of an interval: 0 is an empty one, 1 an unbounded one
    "confidence": _OPEN_FRACTION,
    # p2l: the held-out share of prompts; 0 or 1 leaves one side empty
    "test_fraction": _OPEN_FRACTION,
    # the validation share of training prompts; 0 or 1 leaves one side empty
    "val_fraction": _OPEN_FRACTION,
    # learning rates: zero trains nothing, a negative one ascends the loss
    "lr": Bounds(0, low_open=True),
    "backbone_lr": Bounds(0, low_open=True),
    # penalties: a negative one rewards large weights
    "weight_decay": Bounds(0),
    "penalty": Bounds(0),
    # epoch-loop counts: the most epochs, epochs without improvement, battles per step and per pass
    "max_epochs": _COUNT,
    "patience": _COUNT,
    "batch_size": _COUNT,
    "micro_batch_size": _COUNT,
    # the longest prompt read, in tokens
    "max_length": _COUNT,
    # bootstrap rounds: from fewer than 10, a 95% percentile interval is little more than the extreme rounds
    "rounds": Bounds(10, integer=True),
    # random prompt subsets per size of the aggregation scaling
    "repeats": _COUNT,
    # stem: items of a sample or plan
    "items": _COUNT,
    # repeated trials of every method (0: none)
    "trials": Bounds(0, integer=True),
    # the stage an adaptive plan's extension makes: stage 1 is the plan made without --plan
    "stage": Bounds(2, integer=True),
    # compare: sign-flip permutations of a paired test
    "permutations": _COUNT,
    # compare: the difference whose items needed is reported, on the 0..1 scale (0 needs infinitely many)
    "effect": _OPEN_FRACTION,
    # compare: the non-inferiority margin, a difference on the 0..1 scale (0: no worse at all)
    "margin": Bounds(0, 1, high_open=True),
    # compare: the level of the model confidence set and the gate's one-sided level
    "confidence_set": _OPEN_FRACTION,
    "gate_alpha": Bounds(0, 0.5, low_open=True, high_open=True),
    # serve: a TCP port (0 would be any free port, which no client could be told)
    "port": Bounds(1, 65535, integer=True),
}
