"""What a per-item correctness score is: 1 (right), 0 (wrong) or -1 (no answer).

One rule for every reader: the canonical table's validator (:mod:`evalprism.io.correctness`) and the
harness readers (:mod:`evalprism.io.lm_eval`, :mod:`evalprism.io.inspect_logs`), which check each
value where it is read so that a bad one is reported by file and line or sample, not by a row of an
internal table.
"""

from __future__ import annotations

from typing import Any

import numpy as np

SCORE_EXPECTED = "1 (right), 0 (wrong) or -1 (no answer), or true/false"
_SCORE_TEXT = {"1": 1, "0": 0, "-1": -1, "true": 1, "false": 0, "1.0": 1, "0.0": 0, "-1.0": -1}


def score_value(value: Any) -> int | None:
    """The score ``value`` stands for (booleans, 1/0/-1 numbers or their text), else None."""
    if isinstance(value, bool | np.bool_):
        return int(value)
    if isinstance(value, int | np.integer | float | np.floating):
        return int(value) if float(value) in (1.0, 0.0, -1.0) else None
    return _SCORE_TEXT.get(str(value).strip().lower())
