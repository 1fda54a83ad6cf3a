"""What more samples per item, or more items, would buy a paired comparison.

A per-item difference of two runs averaged over k samples per item has variance
``between + within_k`` (:func:`~evalprism.stats.compare_tests.variance_components`): ``within_k``, the
sampling noise of the k samples, shrinks as 1/k; ``between``, how items differ, only more items
shrink. The mean difference over n items has variance ``(between + within_k) / n`` (times the design
effect of clustered items), so

- k' samples per item: ``SE'^2 = deff (between + within_k k / k') / n``;
- n' items: ``SE'^2 = deff (between + within_k) / n'``;

and the minimum detectable effect is ``(z_{1-α/2} + z_power) SE`` (2.80 SE at 5% and 80%). Wang
(2025, arXiv 2512.21326) finds the within-item part usually the larger on LLM benchmarks, so samples
can buy more power than items. The resolution ratio (Kotawala 2026, arXiv 2605.30315) is N / N*: the
items a comparison had over the items it needs to detect its own observed difference with that power;
below 1 the comparison is unresolved.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from evalprism.stats.compare_tests import items_needed, minimum_detectable_effect


@dataclass(frozen=True)
class NoisePlan:
    """A paired comparison's noise: ``items`` compared at ``samples`` samples per item (the median),
    the ``between``- and ``within``-item variance parts of a per-item difference, and the
    ``design_effect`` of its clustering (1 without clusters)."""

    items: int
    samples: float
    between: float
    within: float
    design_effect: float = 1.0

    @classmethod
    def from_parts(
        cls, items: int, samples: float, total: float, within: float, se: float, se_naive: float
    ) -> NoisePlan:
        """A comparison's plan from what it measured: the variance of its per-item differences
        (``total``), its within-item part (NaN with one sample per item: then all of it counts as
        between items, which more samples cannot shrink), and its SE clustered and naive (their
        squared ratio is the design effect). The within part is an estimate and may exceed the
        total; it is capped there, so the plan's MDE today is the comparison's own."""
        deff = (se / se_naive) ** 2 if math.isfinite(se_naive) and se_naive > 0 and math.isfinite(se) else 1.0
        total = total if math.isfinite(total) else 0.0
        within = min(within, total) if math.isfinite(within) else 0.0
        return cls(items=items, samples=samples, between=total - within, within=within, design_effect=deff)

    def mde(self, samples: float | None = None, items: int | None = None) -> float:
        """The minimum detectable effect (5%, 80% power) at ``samples`` per item and ``items``
        items (each default: as compared)."""
        k = self.samples if samples is None else samples
        n = self.items if items is None else items
        variance = self.design_effect * (self.between + self.within * self.samples / k) / n
        return float(minimum_detectable_effect(math.sqrt(variance)))

    def items_needed(self, difference: float) -> int:
        """Items needed to detect ``difference`` (same units) at the samples per item compared."""
        if difference == 0:
            return 0
        sd = math.sqrt(self.between + self.within)
        return items_needed(difference, sd, design_effect=self.design_effect)

    def resolution_ratio(self, difference: float) -> float:
        """N / N*: items compared over items needed to detect the observed ``difference`` (NaN when no
        difference was observed: there is nothing to resolve)."""
        needed = self.items_needed(difference)
        return math.nan if needed == 0 else self.items / needed

    def sentence(self, more_samples: int, more_items: int, points: float = 100.0) -> str:
        """What ``more_samples`` per item and, instead, ``more_items`` items would do to the MDE, in
        points (``points`` converts a 0..1 scale): "4 more samples per item: MDE 3.1 -> 2.2 points; or
        2,000 more items: 2.5"."""
        now = self.mde() * points
        by_samples = self.mde(samples=self.samples + more_samples) * points
        by_items = self.mde(items=self.items + more_items) * points
        return (
            f"{more_samples} more samples per item: MDE {now:.1f} -> {by_samples:.1f} points; "
            f"or {more_items:,} more items: {by_items:.1f}"
        )
