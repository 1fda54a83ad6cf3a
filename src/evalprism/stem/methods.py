"""The localization methods: their names, which one runs (``method="auto"``) and the IRT estimator's design.

Five methods are compared in trials (:data:`METHODS`): the paper's rule (:mod:`~evalprism.stem.rule`
on the balanced subset of :mod:`~evalprism.stem.balanced`), estimators A (``stratified``,
:mod:`~evalprism.stem.estimate`) and B (``irt``, :mod:`~evalprism.stem.irt`, with a reference
panel), and the two baselines of :mod:`~evalprism.stem.baselines`. One of the first three places a
model (:func:`choose_method`): ``auto`` chooses ``irt`` when the pool has a reference panel of at
least :data:`MIN_PANEL` models (the located model left out), else ``stratified``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evalprism.errors import EvalprismError
from evalprism.io.options import check_applies, check_choice
from evalprism.vocabularies import Design, LocateMethod

if TYPE_CHECKING:
    from evalprism.stem.pool import Pool

#: the localization methods compared in trials: the paper's rule, estimators A (stratified) and B
#: (irt, with a reference panel), and the two baselines
METHODS = ("paper", "stratified", "irt", "random", "bayesian")
#: the methods that estimate the reference score (and so have an RMSE)
SCORE_METHODS = ("stratified", "irt", "random")
#: what each method is, in a report's words
METHOD_LABELS = {
    "paper": "STEM paper rule",
    "stratified": "A: stratified (benchmark x members right)",
    "irt": "B: random sample + IRT difference",
    "random": "random sampling",
    "bayesian": "Bayesian interval posterior",
    "adaptive": "adaptive plan: IRT ability posterior, calibrated on the panel",
}

Method = LocateMethod
#: ``method="auto"`` uses the IRT estimator from this many reference-panel models on
MIN_PANEL = 10


def choose_method(pool: Pool, model: str, method: str = "auto") -> str:
    """The method ``method`` resolves to for ``model`` (``auto``: irt with a panel of at least
    :data:`MIN_PANEL` models without ``model``, else stratified)."""
    check_choice("method", method, LocateMethod)
    if method == "auto":
        return "irt" if pool.panel_size(model) >= MIN_PANEL else "stratified"
    if method == "irt" and pool.panel is None:
        raise EvalprismError(
            "method irt needs a reference panel: build the pool with other models' results on the "
            "same items (`evalprism stem pool ... --panel OTHER_CORRECTNESS`)"
        )
    return method


def resolve_design(pool: Pool, design: str | None) -> Design:
    """The IRT estimator's sample design: ``design`` (default ``random``); refused when given for a
    pool without a reference panel, where no IRT estimate is made and the design would change nothing."""
    check_applies(
        "design",
        design,
        pool.panel is not None,
        "it chooses the IRT estimator's sample, and this pool "
        "has no reference panel (build it with `stem pool --panel`)",
    )
    design = design or "random"
    return check_choice("design", design, Design)  # type: ignore[no-any-return]
