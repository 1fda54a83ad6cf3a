"""RouterBench's AIQ: the average quality of a routing policy over a range of costs.

RouterBench (Hu et al. 2024, arXiv:2403.12031, section 4) summarises a router's quality-vs-cost points
(one per budget, or per willingness-to-pay) by the area under their *non-decreasing convex hull*,
normalised by the cost range: a router that can reach quality q at cost c can reach any mix of two of
its points (route a share of prompts each way), so the upper concave hull is achievable; and one can
always spend more than needed, so the hull is made non-decreasing (flat after its highest point).

    AIQ = 1 / (c_max − c_min) ∫_{c_min}^{c_max} R̃(c) dc

Below the policy's cheapest point the hull is extended flat at that point's value (every policy here
has a point at the cheapest model's cost, so this rarely applies); above its dearest, flat by
construction. numpy only.
"""

from __future__ import annotations

import numpy as np

__all__ = ["aiq", "nondecreasing_hull"]


def nondecreasing_hull(cost: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The vertices (cost, value), cost ascending, of the non-decreasing upper concave hull of the
    points: the upper hull (Andrew's monotone chain) cut at its highest point (flat after it)."""
    cost, value = np.asarray(cost, dtype=np.float64), np.asarray(value, dtype=np.float64)
    assert cost.shape == value.shape and cost.ndim == 1 and cost.size >= 1
    order = np.lexsort((-value, cost))  # by cost; at one cost the best value first
    hull: list[tuple[float, float]] = []
    for c, v in zip(cost[order].tolist(), value[order].tolist(), strict=True):
        if hull and c == hull[-1][0]:
            continue  # a worse point at the same cost
        while len(hull) >= 2:
            (c1, v1), (c2, v2) = hull[-2], hull[-1]
            if (v2 - v1) * (c - c1) <= (v - v1) * (c2 - c1):  # the middle point is on or below the chord
                hull.pop()
            else:
                break
        hull.append((c, v))
    points = np.array(hull)
    top = int(np.argmax(points[:, 1]))  # ties: the cheapest
    return points[: top + 1, 0], points[: top + 1, 1]


def aiq(cost: np.ndarray, value: np.ndarray, low: float, high: float) -> float:
    """AIQ over [``low``, ``high``] (module docstring): the mean over that range of the non-decreasing
    concave hull of the points (``cost``, ``value``), flat left of its first vertex and right of its last.
    With ``high == low``, the hull's value at ``low``."""
    xs, ys = nondecreasing_hull(cost, value)
    if high <= low:
        return float(np.interp(low, xs, ys))
    grid = np.unique(np.concatenate([[low, high], xs[(xs > low) & (xs < high)]]))
    heights = np.interp(grid, xs, ys)  # np.interp is flat outside [xs[0], xs[-1]]
    area = float(np.sum(np.diff(grid) * (heights[:-1] + heights[1:]) / 2.0))
    return area / (high - low)
