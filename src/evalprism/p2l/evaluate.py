"""How well leaderboards predict held-out votes: NLL, accuracy and Brier score (seed 002 Fig. 2).

Predictions are outcome probabilities per battle (n, 4) in the order of
:data:`evalprism.stats.pairwise.OUTCOMES`; observations are the per-battle outcome weights of the
loss in use (soft labels give fractional weights), normalised to sum to one per battle. Battles
the outcome model ignores (ties under ``bt``) are left out. Three predictors are compared: the constant one
(equal probability for every outcome the outcome model knows), the marginal leaderboard and P2L. For an outcome model
with ties (``rk``, ``grk``) each NLL is split into the outcome type and the winner given a decisive
battle (:func:`nll_parts`), to say where a gain comes from. With costs, routing policies are valued
on the battles' verdicts (:mod:`evalprism.p2l.heldout_routing`). The model's record of its training
prompts (:mod:`evalprism.p2l.training_prompts`) says whether the battles are held out at all.
Aggregation scaling (Fig. 6) measures how fast the eq. 3 aggregate of a few prompts' leaderboards
approaches the ground-truth leaderboard of the prompt set.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from scipy.special import expit

from evalprism.errors import EvalprismError
from evalprism.io.battles import BattlesInput
from evalprism.io.costs import cost_vector
from evalprism.io.outputs import OutputKind, SavedResult
from evalprism.io.record import Provenance
from evalprism.p2l.baseline import MarginalBaseline
from evalprism.p2l.heldout_routing import ROUTE_VALUE_KINDS, default_budgets, router_values, routing_table
from evalprism.p2l.model import P2LModel, Prediction, model_names
from evalprism.p2l.options import EvaluateOptions
from evalprism.p2l.prepared import PreparedBattles, prepare_battle_arrays
from evalprism.p2l.routing import check_budget
from evalprism.p2l.training_prompts import PromptOverlap, prompt_overlap, read_training_prompts
from evalprism.progress import status
from evalprism.stats.aggregate import aggregate_leaderboards
from evalprism.stats.outcome_models import NUMPY_OPS, get_outcome_model
from evalprism.stats.outcomes import A_WINS, BOTH_BAD, TIE
from evalprism.stats.pairwise import PairCounts, fit_counts, outcome_weights
from evalprism.stats.policy_value import prompt_scores
from evalprism.vocabularies import OutcomeModelName, RouteValueKind


def log_probs(
    outcome_model: OutcomeModelName, coef_a: np.ndarray, coef_b: np.ndarray, tie: np.ndarray | float | None
) -> np.ndarray:
    """Log-probabilities (n, 4) of battles whose sides have coefficients ``coef_a`` and ``coef_b``
    under ``outcome_model``, with ``tie`` its raw tie parameter (per battle or one value; None without one):
    the registry's formula in numpy (:data:`~evalprism.stats.outcome_models.NUMPY_OPS`), the one
    the head trains with in torch."""
    coef_a, coef_b = np.asarray(coef_a, dtype=np.float64), np.asarray(coef_b, dtype=np.float64)
    raw = None if tie is None else np.broadcast_to(np.asarray(tie, dtype=np.float64), coef_a.shape)
    return np.asarray(get_outcome_model(outcome_model).log_probs(NUMPY_OPS, coef_a, coef_b, raw))


def marginal_log_probs(baseline: MarginalBaseline, a: np.ndarray, b: np.ndarray, models: Sequence[str]) -> np.ndarray:
    """Log-probabilities (n, 4) of battles a vs b (indices into ``models``) under the marginal
    leaderboard ``baseline``, one leaderboard for every battle."""
    coefs = baseline.coefs(models)
    return log_probs(baseline.outcome_model, coefs[a], coefs[b], baseline.tie)


def p2l_log_probs(model: P2LModel, prompts: list[str], a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Log-probabilities (n, 4) of battles a vs b, each under the leaderboard of its own prompt."""
    distinct = list(dict.fromkeys(prompts))
    return prediction_log_probs(
        model.outcome_model, model.predict(distinct), pd.Index(distinct).get_indexer(prompts), a, b
    )


def prediction_log_probs(
    outcome_model: OutcomeModelName, pred: Prediction, pos: np.ndarray, a: np.ndarray, b: np.ndarray
) -> np.ndarray:
    """Log-probabilities (n, 4) of battles a vs b, battle i under the leaderboard ``pred`` row ``pos[i]``."""
    raw = pred.raw_extra
    if raw is None and pred.extra is not None:  # a prediction made with its reported value only
        raw = get_outcome_model(outcome_model).extra.unreport(pred.extra)  # type: ignore[union-attr]
    coefs, rows = pred.coefs[pos], np.arange(a.size)
    return log_probs(outcome_model, coefs[rows, a], coefs[rows, b], None if raw is None else raw[pos])


def _observed(outcome_model: OutcomeModelName, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """The battles the outcome model uses (mask), their outcome weights normalised per battle, and the number of
    outcomes the outcome model predicts (the first k)."""
    k = len(get_outcome_model(outcome_model).outcomes)  # the outcomes the outcome model predicts are the first k
    w = outcome_weights(outcome_model, rows)[:, :k]
    total = w.sum(axis=1)
    used = total > 0
    return used, w[used] / total[used, None], k


def battle_nll(outcome_model: OutcomeModelName, logp: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Each used battle's negative log-likelihood under predictions ``logp`` (the battles the outcome model
    leaves out, ties under ``bt``, are dropped: the mask is ``outcome_weights(...).sum(1) > 0``)."""
    used, w, k = _observed(outcome_model, rows)
    return -(w * np.where(w > 0, logp[used, :k], 0.0)).sum(axis=1)


def nll_parts(
    outcome_model: OutcomeModelName, logp: np.ndarray, rows: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """Each used battle's NLL split in two parts that sum to :func:`battle_nll`: the outcome type
    (decisive, tie, and for ``grk`` both bad) and the winner given that the battle was decisive.

    P(outcome) = P(type) · P(winner | decisive) for a win, P(type) for a tie, so
    −log P(outcome) = −log P(type) − [decisive] log P(winner | decisive), with
    P(decisive) = P(A wins) + P(B wins) and P(A wins | decisive) = P(A wins) / P(decisive). Soft
    labels split the same way, weight by weight. An outcome model that predicts no ties (``bt``, ``bt-tie``)
    has no outcome type to predict: None."""
    used, w, k = _observed(outcome_model, rows)
    if k < 3:
        return None
    lp = logp[used, :k]
    decisive = np.logaddexp(lp[:, 0], lp[:, 1])

    def term(weight: np.ndarray, value: np.ndarray) -> np.ndarray:
        return np.where(weight > 0, weight * value, 0.0)  # 0 · (−inf) is no contribution, not NaN

    kind = -(term(w[:, 0] + w[:, 1], decisive) + sum(term(w[:, j], lp[:, j]) for j in range(2, k)))
    winner = -(term(w[:, 0], lp[:, 0] - decisive) + term(w[:, 1], lp[:, 1] - decisive))
    return kind, winner


#: the two parts of :func:`nll_parts`, as named in ``nll_split.csv`` and the report
NLL_PARTS = ("outcome type", "winner given decisive")


def nll_split(
    outcome_model: OutcomeModelName, rows: np.ndarray, predictions: dict[str, np.ndarray], prompts: np.ndarray
) -> pd.DataFrame:
    """Per predictor and part (:data:`NLL_PARTS`, then ``total``): the mean NLL per battle and, beside
    the marginal leaderboard, its difference to the marginal's same part on the same battles with the
    paired standard error by prompt (:func:`paired_difference`). Empty for an outcome model without ties."""
    used = _observed(outcome_model, rows)[0]
    clusters = np.asarray(prompts)[used]
    parts = {}
    for name, logp in predictions.items():
        split = nll_parts(outcome_model, logp, rows)
        if split is None:
            return pd.DataFrame(columns=["predictor", "part", "nll", "vs_marginal", "se_vs_marginal"])
        parts[name] = dict(zip(NLL_PARTS, split, strict=True)) | {"total": battle_nll(outcome_model, logp, rows)}
    table = []
    for name, by_part in parts.items():
        for part, values in by_part.items():
            diff, se = (np.nan, np.nan)
            if "marginal" in parts and name != "marginal":
                diff, se = paired_difference(values - parts["marginal"][part], clusters)
            table.append(
                {
                    "predictor": name,
                    "part": part,
                    "nll": float(values.mean()),
                    "vs_marginal": diff,
                    "se_vs_marginal": se,
                }
            )
    return pd.DataFrame(table)


def outcome_metrics(outcome_model: OutcomeModelName, logp: np.ndarray, rows: np.ndarray) -> dict[str, float]:
    """Mean NLL, expected accuracy and Brier score of predictions ``logp`` against outcome ``rows``."""
    used, w, k = _observed(outcome_model, rows)
    p = np.exp(logp[used, :k])
    nll = float(battle_nll(outcome_model, logp, rows).mean())
    accuracy = float(w[np.arange(w.shape[0]), p.argmax(axis=1)].mean())
    brier = float(((p - w) ** 2).sum(axis=1).mean())
    return {"battles": int(used.sum()), "nll": nll, "accuracy": accuracy, "brier": brier}


def paired_difference(values: np.ndarray, clusters: np.ndarray) -> tuple[float, float]:
    """Mean of per-battle ``values`` (a difference of two predictors' NLL on the same battles) and its
    standard error clustered by ``clusters`` (the prompt of each battle): battles of one prompt are
    correlated, so they count as one draw (the sandwich estimator with the small-sample factor
    G/(G-1)). NaN for the SE with fewer than two prompts."""
    n = values.size
    mean = float(values.mean())
    codes, uniques = pd.factorize(clusters)
    g = len(uniques)
    if g < 2:
        return mean, float("nan")
    per_prompt = np.bincount(codes, weights=values - mean, minlength=g)
    return mean, float(np.sqrt(g / (g - 1) * np.sum(per_prompt**2)) / n)


def constant_log_probs(outcome_model: OutcomeModelName, n: int) -> np.ndarray:
    """The constant predictor's log-probabilities (n, 4): every outcome the outcome model knows equally likely."""
    k = len(get_outcome_model(outcome_model).outcomes)
    constant = np.full((n, 4), -np.inf)
    constant[:, :k] = -np.log(k)
    return constant


def compare_predictors(
    outcome_model: OutcomeModelName,
    rows: np.ndarray,
    predictions: dict[str, np.ndarray],
    prompts: np.ndarray | None = None,
) -> pd.DataFrame:
    """One row per predictor (constant first): battles, nll, accuracy, brier. With ``prompts`` (each
    battle's prompt) and a ``marginal`` predictor: ``nll_vs_marginal``, each predictor's mean NLL minus
    the marginal's on the same battles (negative: better), and ``se_vs_marginal``, its paired standard
    error clustered by prompt (:func:`paired_difference`)."""
    everything = {"constant": constant_log_probs(outcome_model, rows.shape[0]), **predictions}
    table = pd.DataFrame(
        [{"predictor": name, **outcome_metrics(outcome_model, logp, rows)} for name, logp in everything.items()]
    )
    if prompts is not None and "marginal" in predictions:
        used = _observed(outcome_model, rows)[0]
        base = battle_nll(outcome_model, predictions["marginal"], rows)
        pairs = [
            paired_difference(battle_nll(outcome_model, logp, rows) - base, np.asarray(prompts)[used])
            for logp in everything.values()
        ]
        table["nll_vs_marginal"] = [d for d, _ in pairs]
        table["se_vs_marginal"] = [se for _, se in pairs]
        table.loc[table["predictor"] == "marginal", ["nll_vs_marginal", "se_vs_marginal"]] = np.nan
    return table


def function_distance(coefs: np.ndarray, truth: np.ndarray) -> float:
    """Mean |σ(θ_a − θ_b) − σ(θ*_a − θ*_b)| over ordered model pairs a ≠ b: the L1 distance between
    the win probabilities two leaderboards predict (seed 002 section 3.5)."""
    d = expit(coefs[:, None] - coefs[None, :]) - expit(truth[:, None] - truth[None, :])
    m = coefs.size
    return float(np.abs(d).sum() / (m * (m - 1)))


def aggregation_scaling(
    prompt_coefs: np.ndarray, truth: np.ndarray, sizes: list[int], repeats: int = 10, seed: int = 0
) -> pd.DataFrame:
    """Fig. 6: distance between the eq. 3 aggregate of ``k`` random prompts' leaderboards and the
    ground-truth leaderboard ``truth``, for each k in ``sizes`` (``repeats`` draws each). The draws are
    over the rows of ``prompt_coefs``: give them in content order (by prompt), not file order."""
    rng = np.random.default_rng(seed)
    n = prompt_coefs.shape[0]
    rows = []
    for k in sizes:
        for r in range(repeats if k < n else 1):
            pick = rng.choice(n, size=min(k, n), replace=False)
            rows.append(
                {
                    "prompts": int(min(k, n)),
                    "repeat": r,
                    "l1": function_distance(aggregate_leaderboards(prompt_coefs[pick]), truth),
                }
            )
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class HeldOutRouting:
    """How the routing policies were valued on the held-out verdicts (with costs): the budgets (each
    prompt's expected cost at most the budget: ``budget_scope`` ``prompt``), the value the routers
    maximise, each model's cost and the cost column read, where the best single model was chosen
    from, the models without a battle here, and the range of the better half of the models' mean
    routing value in each value kind (:func:`value_spread`)."""

    budgets: tuple[float, ...]
    value: RouteValueKind
    budget_scope: str
    costs: dict[str, float]
    cost_column: str
    best_single_from: str
    models_without_battles: tuple[str, ...]
    value_spread: dict[str, list[float]]


@dataclass(frozen=True)
class EvaluationSummary:
    """What one evaluation counted: the battles and distinct prompts read, the P2L model's outcome
    model, the battles it uses (``bt`` leaves out ties), how many of the prompts the model was trained
    or validated on (:class:`~evalprism.p2l.training_prompts.PromptOverlap`) and, with costs, how the
    routing policies were valued (:class:`HeldOutRouting`)."""

    n_battles: int
    n_prompts: int
    outcome_model: OutcomeModelName
    battles_used: int
    overlap: PromptOverlap
    routing: HeldOutRouting | None = None


@dataclass
class EvaluationResult(SavedResult):
    """``metrics`` (constant / marginal / P2L on the battles), ``nll_split`` (their NLL in outcome type
    and winner parts, for an outcome model with ties), ``routing`` (the held-out router table when costs were
    given: :mod:`evalprism.p2l.heldout_routing`) and ``scaling`` (Fig. 6); the options it ran with,
    what it counted (:class:`EvaluationSummary`), what the readers chose and the battles the outcome
    model left out (``notes``)."""

    output_kind: ClassVar[OutputKind] = OutputKind.P2L_EVALUATE

    metrics: pd.DataFrame
    scaling: pd.DataFrame
    options: EvaluateOptions
    summary: EvaluationSummary
    provenance: Provenance = field(default_factory=Provenance)
    notes: tuple[str, ...] = ()
    nll_split: pd.DataFrame = field(default_factory=pd.DataFrame)
    routing: pd.DataFrame = field(default_factory=pd.DataFrame)

    def findings(self) -> list[str]:
        """The evaluation's headline: whether the battles were held out, the NLL of P2L against the
        baselines, and what that difference means."""
        from evalprism.p2l.reports import evaluation_findings

        return evaluation_findings(self)

    def frames(self) -> dict[str, pd.DataFrame]:
        out = {"metrics": self.metrics, "scaling": self.scaling}
        if len(self.nll_split):
            out["nll_split"] = self.nll_split
        if len(self.routing):
            out["routing"] = self.routing
        return out

    def report(self) -> Any:
        from evalprism.p2l.reports import evaluation_report

        return evaluation_report(self)


def evaluate_model_dir(
    model_dir: str | Path,
    battles: pd.DataFrame | BattlesInput,
    options: EvaluateOptions | None = None,
    *,
    costs: Mapping[str, float] | None = None,
    cache_dir: str | Path | None = None,
    progress: bool = True,
) -> EvaluationResult:
    """:func:`evaluate_model` with the model in ``model_dir``: the battles, costs and budgets are
    checked against its model list first (:func:`~evalprism.p2l.model.model_names`, milliseconds), so
    a bad one fails before the encoder loads (tens of seconds). The prompts the model was trained on
    are read from its record (:mod:`evalprism.p2l.training_prompts`), to say whether the battles are
    held out."""
    options = options or EvaluateOptions()
    options.check_costs(costs is not None)
    names = model_names(model_dir)
    prepared = prepare_battle_arrays(battles, names=names, min_battles=1)
    if costs is not None:
        routing_costs(names, costs, options.budgets, options.value or "score")
    recorded = read_training_prompts(model_dir)
    model = P2LModel.load(model_dir, cache_dir=cache_dir, progress=progress)
    return evaluate_model(model, prepared, options, costs=costs, training_prompts=recorded, progress=progress)


def routing_costs(
    names: list[str], costs: Mapping[str, float], budgets: Sequence[float] | None, value: str
) -> tuple[np.ndarray, list[float]]:
    """The checks of a held-out routing evaluation that need only the model list: a cost for every
    model, budgets that cover the cheapest model (each prompt's cost is bounded), a known value;
    returns the costs in ``names`` order and the budgets (default: :func:`default_budgets`)."""
    if value not in ROUTE_VALUE_KINDS:
        raise EvalprismError(
            f"unknown routing value {value!r}; expected one of {', '.join(ROUTE_VALUE_KINDS)}", parameter="value"
        )
    cost = cost_vector(costs, names)
    chosen = default_budgets(cost) if not budgets else [float(b) for b in budgets]
    for b in chosen:
        if not np.isfinite(b):
            raise EvalprismError(f"budget {b}: expected a finite number", parameter="budgets")
        check_budget(b, cost, names, "prompt")
    return cost, chosen


def value_spread(model: P2LModel, pred: Prediction) -> dict[str, list[float]]:
    """The range of the per-model mean routing value over the better half of the models (by mean score), in
    the model's own value and in the score value: how far apart the values put the models worth routing to."""
    means = {
        kind: router_values(kind, model.outcome_model, model.routing_value, pred.coefs, pred.extra).mean(axis=0)
        for kind in ROUTE_VALUE_KINDS
    }
    top = np.argsort(-means["score"])[: max(1, len(model.models) // 2)]
    return {kind: [float(v[top].min()), float(v[top].max())] for kind, v in means.items()}


def held_out_scores(arrays: Any, rows: np.ndarray, prompt_codes: np.ndarray, n_prompts: int) -> np.ndarray:
    """Each model's held-out score on each prompt (:func:`~evalprism.stats.policy_value.prompt_scores`):
    a win 1, a tie of either kind ½, a soft label its expected result."""
    weights = rows / rows.sum(axis=1, keepdims=True)
    result_a = weights[:, A_WINS] + 0.5 * (weights[:, TIE] + weights[:, BOTH_BAD])
    return prompt_scores(prompt_codes, arrays.a, arrays.b, result_a, n_prompts, len(arrays.names))


def evaluate_model(
    model: P2LModel,
    battles: pd.DataFrame | BattlesInput | PreparedBattles,
    options: EvaluateOptions | None = None,
    *,
    costs: Mapping[str, float] | None = None,
    training_prompts: dict[str, np.ndarray] | None = None,
    progress: bool = True,
) -> EvaluationResult:
    """Score ``model`` on held-out ``battles``: NLL / accuracy / Brier against the constant and the
    marginal (training) leaderboard, split into outcome type and winner parts for an outcome model with ties
    (:func:`nll_split`), and the aggregation scaling of Fig. 6 against the marginal BT fitted on these
    battles themselves (the ground truth of this prompt set).

    With ``costs`` (model -> cost per query): the held-out router table at ``budgets`` (default: five
    from the cheapest to the dearest model; :func:`~evalprism.p2l.heldout_routing.routing_table`), the
    routers maximising ``value`` (``score`` or ``own``). ``training_prompts``: the model's record of its
    training prompts (:func:`~evalprism.p2l.training_prompts.read_training_prompts`); the overlap with
    these battles' prompts is counted in ``summary.overlap``. ``battles`` may come prepared
    (:func:`~evalprism.p2l.prepared.prepare_battle_arrays` with the model's list, as
    :func:`evaluate_model_dir` does)."""
    options = options or EvaluateOptions()
    value: RouteValueKind = options.value or "score"
    column = getattr(costs, "column", "cost")  # the cost column read (a cost table knows it)
    battles = prepared_for(model, battles)
    codes, prompts = battles.prompt_index()
    cost, budgets = (None, []) if costs is None else routing_costs(model.models, costs, options.budgets, value)
    distinct = list(prompts)
    status(f"scoring {battles.n_battles} battles on {len(distinct)} prompts", progress)
    note = battles.ignored_note(model.outcome_model)
    if note:
        status(note, progress)
    pred = model.predict(distinct)  # once: the votes, the routers and the scaling curve all read these leaderboards
    predictions = predictor_log_probs(model, pred, battles)
    metrics = compare_predictors(model.outcome_model, battles.rows, predictions, codes)
    constant = constant_log_probs(model.outcome_model, battles.rows.shape[0])
    split = nll_split(model.outcome_model, battles.rows, {"constant": constant, **predictions}, codes)
    routing = pd.DataFrame()
    if cost is not None:
        status(f"valuing routers on the held-out verdicts at {len(budgets)} budgets", progress)
        routing = held_out_routing_table(model, pred, battles, cost, budgets, value)
    present = np.unique(np.concatenate([battles.arrays.a, battles.arrays.b]))  # the models with a battle here
    scaling = scaling_curve(model, pred, battles, present, options)
    summary = EvaluationSummary(
        n_battles=battles.n_battles,
        n_prompts=len(distinct),
        outcome_model=model.outcome_model,
        battles_used=int(metrics["battles"].iloc[0]),
        overlap=prompt_overlap(training_prompts, distinct),
        routing=None if cost is None else held_out_routing(model, pred, cost, budgets, value, column, present),
    )
    notes = (note,) if note else ()
    return EvaluationResult(metrics, scaling, options, summary, evaluation_provenance(battles), notes, split, routing)


def prepared_for(model: P2LModel, battles: pd.DataFrame | PreparedBattles) -> PreparedBattles:
    """``battles`` prepared against the model's list (as given when they come prepared for it): the
    scaling draws pick prompts in their order, and every sum over battles runs in it."""
    if not isinstance(battles, PreparedBattles):
        battles = prepare_battle_arrays(battles, names=model.models, min_battles=1)
    if battles.arrays.names != model.models:
        raise ValueError("battles prepared for another model list")
    return battles


def evaluation_provenance(battles: PreparedBattles) -> Provenance:
    """What the readers chose for the evaluation's battles: the lines they left on the canonical table
    (``attrs["choices"]``)."""
    return Provenance(choices=tuple(battles.table.attrs.get("choices", [])))


def predictor_log_probs(model: P2LModel, pred: Prediction, battles: PreparedBattles) -> dict[str, np.ndarray]:
    """Each predictor's log-probabilities (n, 4) of the battles: the marginal leaderboard (when the
    model has one) and P2L, each battle under its prompt's leaderboard ``pred``."""
    codes, arrays = battles.prompt_index()[0], battles.arrays
    predictions = {"p2l": prediction_log_probs(model.outcome_model, pred, codes, arrays.a, arrays.b)}
    if model.marginal is not None:
        predictions = {"marginal": marginal_log_probs(model.marginal, arrays.a, arrays.b, model.models), **predictions}
    return predictions


def held_out_routing_table(
    model: P2LModel, pred: Prediction, battles: PreparedBattles, cost: np.ndarray, budgets: list[float], value: str
) -> pd.DataFrame:
    """The routing policies valued on the battles' verdicts at ``budgets``
    (:func:`~evalprism.p2l.heldout_routing.routing_table`): the P2L router on the prompts' predicted
    leaderboards ``pred``, the best single model by the marginal leaderboard (without one, by P2L's
    mean prediction over these prompts: no verdict read)."""
    codes, prompts = battles.prompt_index()
    scores = held_out_scores(battles.arrays, battles.rows, codes, len(prompts))
    p2l_values = router_values(value, model.outcome_model, model.routing_value, pred.coefs, pred.extra)
    baseline = model.marginal
    if baseline is not None:
        marginal = baseline.coefs(model.models)[None, :]
        single = router_values(value, model.outcome_model, model.routing_value, marginal, baseline.extra)[0]
    else:
        single = p2l_values.mean(axis=0)
    return routing_table(p2l_values, single, scores, cost, model.models, budgets)


def scaling_curve(
    model: P2LModel, pred: Prediction, battles: PreparedBattles, present: np.ndarray, options: EvaluateOptions
) -> pd.DataFrame:
    """Fig. 6 over the models ``present`` in the battles (:func:`aggregation_scaling`): the eq. 3
    aggregate of random prompt subsets against these battles' own BT fit, and beside it
    (``marginal_train_l1``) the training battles' marginal leaderboard's distance to that fit."""
    arrays, n_prompts = battles.arrays, len(battles.prompt_index()[1])
    truth = fit_counts(
        PairCounts.from_battles(arrays.a, arrays.b, arrays.outcome, len(model.models), p_b=arrays.p_b), "bt"
    ).coefs[present]
    sizes = [k for k in (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500) if k < n_prompts] + [n_prompts]
    scaling = aggregation_scaling(pred.coefs[:, present], truth, sizes, options.repeats, options.seed)
    if model.marginal is not None:
        scaling["marginal_train_l1"] = function_distance(model.marginal.coefs(model.models)[present], truth)
    return scaling


def held_out_routing(
    model: P2LModel,
    pred: Prediction,
    cost: np.ndarray,
    budgets: list[float],
    value: RouteValueKind,
    cost_column: str,
    present: np.ndarray,
) -> HeldOutRouting:
    """How the routing policies were valued (:class:`HeldOutRouting`)."""
    with_battles = set(present.tolist())
    return HeldOutRouting(
        budgets=tuple(budgets),
        value=value,
        budget_scope="prompt",
        costs=dict(zip(model.models, map(float, cost), strict=True)),
        cost_column=cost_column,
        best_single_from="the marginal leaderboard of the training battles"
        if model.marginal is not None
        else "P2L's mean predicted value over the evaluation prompts (no marginal leaderboard)",
        models_without_battles=tuple(m for i, m in enumerate(model.models) if i not in with_battles),
        value_spread=value_spread(model, pred),
    )
