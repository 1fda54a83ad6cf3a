"""A router benchmark from the logs users have (``evalprism p2l bench TRAIN HELDOUT --costs``).

Neither router leaderboard gives a user deciding whether to deploy a router what they need: the
router against the simple routers they could deploy instead, on their own held-out data, with paired
intervals (LLMRouterBench, arXiv:2601.07206, finds most learned routers statistically alike). Here,
on a training and a held-out split of graded items (:mod:`evalprism.p2l.bench_data`):

1. every baseline of :mod:`evalprism.p2l.routers` is fitted on the training items only, on the same
   prompt embeddings (:mod:`evalprism.embed`, cached), and P2L enters with its predicted per-prompt
   values where a P2L model is given;
2. every learned policy routes by the same budget rule (:mod:`evalprism.p2l.bench_policies`), beside
   the best single model, the cost-matched random mix and the oracle;
3. every policy is valued *pointwise* on the held-out items (the score of the model it routes to,
   expected over a mix; its cost that model's cost), with intervals, paired differences to the
   reference (P2L, else the best learned router), BH-adjusted p, one sentence per budget and
   RouterBench's AIQ with a bootstrap interval (:mod:`evalprism.p2l.bench_valuation`).

When both splits are pairwise battles (:mod:`evalprism.p2l.bench_battles`) the prompts are the items,
the baselines learn from each training prompt's sparse per-model results, and every policy is valued
by its held-out win rate, the valuation of ``p2l evaluate --costs``; the summary's ``valuation`` says
which was used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np
import pandas as pd

from evalprism.errors import EvalprismError
from evalprism.io.costs import cost_vector
from evalprism.io.embed_options import EmbedOptions
from evalprism.io.items import Input
from evalprism.io.outputs import OutputKind, SavedResult
from evalprism.io.record import Provenance
from evalprism.p2l.bench_battles import WIN_RATE, BattleSplit, battle_splits, holds_battles
from evalprism.p2l.bench_data import GradedItems, aligned_splits, read_graded
from evalprism.p2l.bench_policies import (
    FIXED_POLICIES,
    battle_outcomes,
    fixed_policies,
    item_outcomes,
    learned_policies,
)
from evalprism.p2l.bench_valuation import aiq_table, battle_policy_table, policy_table, verdict_lines
from evalprism.p2l.heldout_routing import default_budgets
from evalprism.p2l.options import BenchOptions
from evalprism.p2l.routers import ROUTERS, get_router
from evalprism.p2l.routers.leaderboards import mean_quality
from evalprism.p2l.routing import check_budget
from evalprism.progress import status
from evalprism.stats.policy_value import PolicyValue

#: the policy name of the P2L router
P2L = "p2l"


@dataclass(frozen=True)
class BenchSummary:
    """What one benchmark counted and decided: items per split (and items left out as not scored by
    every model), the models and their costs, the budgets, the valuation, the reference policy and why,
    the learned policies, and each baseline's chosen hyper-parameters."""

    train_items: int
    heldout_items: int
    train_incomplete: int
    heldout_incomplete: int
    models: tuple[str, ...]
    costs: dict[str, float]
    cost_column: str
    cost_source: str
    budgets: tuple[float, ...]
    valuation: str
    reference: str
    reference_why: str
    learned: tuple[str, ...]
    hyperparameters: dict[str, str]
    embedder: str


@dataclass
class BenchResult(SavedResult):
    """``policies`` (one row per policy and budget: value, se, cost, diff_vs_ref, low, high, p, p_adj,
    mde), ``aiq`` (per policy, with its bootstrap interval), the options, what was counted
    (:class:`BenchSummary`), what the readers chose, and the notes."""

    output_kind: ClassVar[OutputKind] = OutputKind.P2L_BENCH

    policies: pd.DataFrame
    aiq: pd.DataFrame
    options: BenchOptions
    summary: BenchSummary
    provenance: Provenance = field(default_factory=Provenance)
    notes: tuple[str, ...] = ()

    def findings(self) -> list[str]:
        """One sentence per budget (every policy against the reference), the AIQ ranking and whether a
        learned router beats the per-benchmark leaderboard."""
        from evalprism.p2l.bench_report import bench_findings

        return bench_findings(self)

    def frames(self) -> dict[str, pd.DataFrame]:
        return {"policies": self.policies, "aiq": self.aiq}

    def report(self) -> Any:
        from evalprism.p2l.bench_report import bench_report

        return bench_report(self)

    def verdicts(self) -> list[str]:
        """The sentences per budget (:func:`~evalprism.p2l.bench_valuation.verdict_lines`)."""
        return verdict_lines(self.policies, self.summary.reference)


def bench_routers(
    train: Input,
    heldout: Input,
    costs: Mapping[str, float] | None,
    options: BenchOptions | None = None,
    *,
    model_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    embedder: Embeds | None = None,
    progress: bool = True,
) -> BenchResult:
    """The router benchmark (module docstring) of ``train`` and ``heldout`` (graded logs or score
    tables, or two battles files) with ``costs`` (model -> cost per query; None: the items' own cost
    column, :func:`decision_costs`). ``model_dir``: a P2L model, valued as the
    reference. ``embedder``: what embeds the prompts (anything with ``embed(texts) -> (n, d)``; default
    :func:`~evalprism.embed.get_embedder` of the ``embedding`` options, through the cache)."""
    options = options or BenchOptions()
    names = (_where(train, "TRAIN"), _where(heldout, "HELDOUT"))
    battles = read_battles(train, heldout, names, options)
    if battles is None:
        tr = read_graded(train, "TRAIN", options.harness)
        ho = aligned_splits(tr, read_graded(heldout, "HELDOUT", options.harness), names)
    else:
        tr, ho = battles[0].items, battles[1].items
    cost, spent, cost_source = decision_costs(costs, tr, ho, names)
    budgets = [float(b) for b in options.budgets] if options.budgets else default_budgets(cost)
    for b in budgets:
        check_budget(b, cost, list(tr.models), "prompt")
    p2l_values = None if model_dir is None else p2l_predictions(model_dir, ho, cache_dir, progress)
    x_train, x_held = embed_prompts(tr, ho, embedder or options.embedding, cache_dir, progress)
    pairs = None if battles is None else battles[0].pairs
    predictions, chosen = fit_baselines(tr, ho, x_train, x_held, options.seed, progress, pairs)
    if p2l_values is not None:
        predictions = {P2L: p2l_values, **predictions}
    status(
        f"valuing {len(predictions) + 3} policies on {ho.n_items:,} held-out items at {len(budgets)} budgets", progress
    )
    if battles is None:
        table, aiq, reference, why = value_pointwise(predictions, tr, ho, cost, budgets, spent, options)
    else:
        table, aiq, reference, why = value_on_battles(predictions, tr, ho, cost, budgets, options)
    summary = BenchSummary(
        train_items=tr.n_items,
        heldout_items=ho.n_items,
        train_incomplete=tr.incomplete,
        heldout_incomplete=ho.incomplete,
        models=tr.models,
        costs=dict(zip(tr.models, map(float, cost), strict=True)),
        cost_column=getattr(costs, "column", "cost"),
        cost_source=cost_source,
        budgets=tuple(budgets),
        valuation="pointwise" if battles is None else WIN_RATE,
        reference=reference,
        reference_why=why,
        learned=tuple(predictions),
        hyperparameters=chosen,
        embedder=options.embedding.embedder,
    )
    notes = _notes(tr, ho, battles, names, options.se_by)
    return BenchResult(table, aiq, options, summary, tr.provenance + ho.provenance, notes)


def _notes(
    tr: GradedItems,
    ho: GradedItems,
    battles: tuple[BattleSplit, BattleSplit] | None,
    names: tuple[str, str],
    se_by: str,
) -> tuple[str, ...]:
    """The result's notes: items left out or what the battles gave, and what few units mean."""
    if battles is not None:
        return _battle_notes(battles, names) + _unit_notes("prompt", ho.n_items)
    units = len(np.unique(ho.prompt if se_by == "prompt" else ho.benchmark))
    return tuple(_incomplete_notes(tr, ho, names)) + _unit_notes(se_by, units)


def read_battles(
    train: Input, heldout: Input, names: tuple[str, str], options: BenchOptions
) -> tuple[BattleSplit, BattleSplit] | None:
    """Both splits as battles when both are battles files (None when neither is); one of each kind is
    refused, and so is ``--se-by benchmark`` on battles (their value's SE is by prompt)."""
    kinds = (holds_battles(train), holds_battles(heldout))
    if not any(kinds):
        return None
    if not all(kinds):
        which, other = (0, 1) if kinds[0] else (1, 0)
        raise EvalprismError(
            f"{names[which]} ({('TRAIN', 'HELDOUT')[which]}): holds pairwise battles (a 'winner' column) but "
            f"{names[other]} holds graded items; `p2l bench` needs both splits of one kind: graded items (valued "
            "pointwise) or battles (valued by held-out win rate)"
        )
    if options.se_by != "prompt":
        raise EvalprismError(
            f"se_by {options.se_by}: battles are valued by held-out win rate, whose standard errors are clustered "
            "by prompt; use se_by prompt",
            parameter="se_by",
        )
    return battle_splits(train, heldout, names, options.harness)


def _battle_notes(battles: tuple[BattleSplit, BattleSplit], names: tuple[str, str]) -> tuple[str, ...]:
    """What the battles gave: battles per split and each split's models per prompt."""
    return tuple(
        f"{where}: {split.battles:,} battles on {split.items.n_items:,} prompts, "
        f"{np.isfinite(split.items.quality).sum(axis=1).mean():.1f} of {len(split.items.models)} models per prompt "
        "on average (the rest have no result there)"
        for where, split in zip(names, battles, strict=True)
    )


def value_pointwise(
    predictions: Mapping[str, np.ndarray],
    tr: GradedItems,
    ho: GradedItems,
    cost: np.ndarray,
    budgets: list[float],
    spent: np.ndarray,
    options: BenchOptions,
) -> tuple[pd.DataFrame, pd.DataFrame, str, str]:
    """The policy table, the AIQ table, the reference and why, valued pointwise on graded items."""
    outcomes, reference, why = value_policies(predictions, tr, ho, cost, budgets, spent)
    clusters = pd.factorize(pd.Series(ho.prompt if options.se_by == "prompt" else ho.benchmark))[0]
    table = policy_table(outcomes, reference, clusters)
    policies = list(dict.fromkeys(name for name, _ in outcomes))
    per_model = spent if spent.ndim == 1 else spent.mean(axis=0)
    cost_range = (float(per_model.min()), float(per_model.max()))
    aiq = aiq_table(outcomes, policies, budgets, cost_range, clusters, options.rounds, options.seed)
    return table, aiq, reference, why


def value_on_battles(
    predictions: Mapping[str, np.ndarray],
    tr: GradedItems,
    ho: GradedItems,
    cost: np.ndarray,
    budgets: list[float],
    options: BenchOptions,
) -> tuple[pd.DataFrame, pd.DataFrame, str, str]:
    """The policy table, the AIQ table, the reference and why, valued by held-out win rate on battles
    (``ho.quality``: each model's win rate on each held-out prompt, NaN: no battle)."""
    valued, reference, why = value_policies(
        predictions, tr, ho, cost, budgets, valuer=lambda probs: battle_outcomes(probs, ho.quality, cost)
    )
    table = battle_policy_table(valued, reference)
    policies = list(dict.fromkeys(name for name, _ in valued))
    points = {key: (np.nan_to_num(pv.prompt_value), spent) for key, (pv, spent) in valued.items()}
    covered = {key: pv.covered for key, (pv, _) in valued.items()}
    clusters = np.arange(ho.n_items)
    cost_range = (float(cost.min()), float(cost.max()))
    aiq = aiq_table(points, policies, budgets, cost_range, clusters, options.rounds, options.seed, covered)
    return table, aiq, reference, why


def decision_costs(
    costs: Mapping[str, float] | None, tr: GradedItems, ho: GradedItems, names: tuple[str, str]
) -> tuple[np.ndarray, np.ndarray, str]:
    """What routing decides on and what a policy is charged, and a sentence saying which: the per-model
    cost (M,) the budget rule reads (the costs table; without one, each model's mean cost over the
    training items' cost column: a router cannot know an item's cost before it runs it), and the cost
    charged on the held-out items (their own cost column where they have one, (n, M), else the per-model
    cost)."""
    if costs is not None:
        cost = cost_vector(costs, list(tr.models))
        decided = "the costs table"
    elif tr.item_cost is not None and ho.item_cost is not None:
        cost = tr.item_cost.mean(axis=0)
        decided = f"each model's mean cost on the training items ({names[0]}'s cost column)"
    else:
        lacking = names[0] if tr.item_cost is None else names[1]
        raise EvalprismError(
            f"{lacking}: no 'cost' column: give costs (a cost per model), or a cost column in both splits",
            parameter="costs",
        )
    if ho.item_cost is None:
        return cost, cost, f"decided and charged by {decided}"
    return cost, ho.item_cost, f"decided by {decided}; charged each held-out item's own cost ({names[1]}'s cost column)"


def _unit_notes(unit: str, units: int) -> tuple[str, ...]:
    """What clustering by ``unit`` means for the intervals, when there are few units."""
    if units >= 30:
        return ()
    return (
        f"standard errors clustered by {unit} over {units} {unit}s: the intervals use a t with {units - 1} degree(s) "
        f"of freedom and are wide{' (one unit: no interval)' if units < 2 else ''}; few units make a rough SE",
    )


def _where(given: Input, role: str) -> str:
    """How messages name an input: its path, or its role for a table given in memory."""
    return role if isinstance(given, pd.DataFrame) else str(given)


def _incomplete_notes(tr: GradedItems, ho: GradedItems, names: tuple[str, str]) -> list[str]:
    return [
        f"{where}: {split.incomplete:,} item(s) not scored by every model left out (a pointwise value needs every "
        "model's score)"
        for where, split in zip(names, (tr, ho), strict=True)
        if split.incomplete
    ]


class Embeds(Protocol):
    """What embeds prompts: an :class:`~evalprism.embed.Embedder`, or any object with its ``embed``."""

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def embed_prompts(
    tr: GradedItems, ho: GradedItems, spec: EmbedOptions | Embeds, cache_dir: str | Path | None, progress: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Both splits' prompts embedded once (an Embedder encodes distinct texts, through its cache)."""
    prompts = tr.prompt + ho.prompt
    if isinstance(spec, EmbedOptions):  # the embedder says its distinct and cached counts up front
        from evalprism.embed import get_embedder

        embedded = get_embedder(spec, cache_dir=cache_dir, progress=progress).embed(prompts, what="the prompts")
    else:
        status(f"embedding {len(prompts):,} prompts", progress)
        embedded = spec.embed(prompts)
    vectors = np.asarray(embedded, dtype=np.float64)
    return vectors[: tr.n_items], vectors[tr.n_items :]


def fit_baselines(
    tr: GradedItems,
    ho: GradedItems,
    x_train: np.ndarray,
    x_held: np.ndarray,
    seed: int,
    progress: bool,
    pairs: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """Every registry baseline fitted on the training items, its predicted quality of the held-out
    items, and its chosen hyper-parameters (for the record). ``pairs``: the training split's decisive
    battles (prompt row, winner, loser), which a router that learns from battles (``fit_battles``:
    RouteLLM's mf) fits on instead of the sparse quality."""
    predictions, chosen = {}, {}
    for name in ROUTERS:
        status(f"fitting {name} on {tr.n_items:,} training items", progress)
        router: Any = get_router(name).build(seed)
        if pairs is not None and hasattr(router, "fit_battles"):
            router.fit_battles(x_train, pairs, len(tr.models))
        else:
            router.fit(x_train, tr.quality, tr.benchmark)
        predictions[name] = router.predict(x_held, ho.benchmark)
        if hasattr(router, "k_"):
            chosen[name] = f"k = {router.k_} (5-fold CV)"
        elif hasattr(router, "alpha_"):
            chosen[name] = f"alpha = {router.alpha_:g} (early-stopping validation score)"
    return predictions, chosen


def p2l_predictions(model_dir: str | Path, ho: GradedItems, cache_dir: str | Path | None, progress: bool) -> np.ndarray:
    """The P2L model's routing values of the held-out items (expected score against a uniform opponent,
    :func:`~evalprism.p2l.heldout_routing.score_values`), columns in the benchmark's model order."""
    from evalprism.p2l.heldout_routing import router_values
    from evalprism.p2l.model import P2LModel, model_names

    listed = model_names(model_dir)
    missing = [m for m in ho.models if m not in listed]
    if missing:
        raise EvalprismError(
            f"{model_dir}: the P2L model does not know {len(missing)} of the scored models: {', '.join(missing)}"
        )
    model = P2LModel.load(model_dir, cache_dir=cache_dir, progress=progress)
    status(f"P2L leaderboards of {ho.n_items:,} held-out prompts", progress)
    pred = model.predict(ho.prompt)
    values = router_values("score", model.outcome_model, model.routing_value, pred.coefs, pred.extra)
    return values[:, [model.models.index(m) for m in ho.models]]


def _mean_value(value: np.ndarray | PolicyValue) -> float:
    return value.value if isinstance(value, PolicyValue) else float(value.mean())


def value_policies(
    predictions: Mapping[str, np.ndarray],
    tr: GradedItems,
    ho: GradedItems,
    cost: np.ndarray,
    budgets: list[float],
    spent: np.ndarray | None = None,
    valuer: Callable[[np.ndarray], tuple[Any, np.ndarray]] | None = None,
) -> tuple[dict[tuple[str, float], tuple[Any, np.ndarray]], str, str]:
    """Every policy's per-item (value, cost) at every budget, the reference policy and why it is one:
    P2L when given, else the learned router with the highest mean held-out value over the budgets.
    ``cost`` (M,) is what the budget rule decides on, ``spent`` what each item is charged ((M,) or
    (n, M); default ``cost``). ``valuer``: how a routing distribution is valued (default pointwise,
    :func:`~evalprism.p2l.bench_policies.item_outcomes`; on battles
    :func:`~evalprism.p2l.bench_policies.battle_outcomes`, a :class:`PolicyValue` in place of the values)."""
    charged = cost if spent is None else spent
    value = valuer or (lambda probs: item_outcomes(probs, ho.quality, charged))
    learned = {b: learned_policies(predictions, cost, b) for b in budgets}
    outcomes = {(n, b): value(p) for b in budgets for n, p in learned[b].items()}
    if P2L in predictions:
        reference, why = P2L, "the P2L model given"
    else:
        reference = max(predictions, key=lambda n: np.mean([_mean_value(outcomes[(n, b)][0]) for b in budgets]))
        why = (
            "no P2L model given: the learned router with the highest mean held-out value over the budgets (chosen "
            "on the held-out items, so its differences to the others lean in its favour)"
        )
    means = mean_quality(tr.quality)
    for b in budgets:
        spend = float(outcomes[(reference, b)][1].mean())
        for name, probs in fixed_policies(means, ho.quality, cost, b, spend).items():
            outcomes[(name, b)] = value(probs)
    order = [*predictions, *FIXED_POLICIES]
    ordered = {(n, b): outcomes[(n, b)] for b in budgets for n in order}
    return ordered, reference, why
