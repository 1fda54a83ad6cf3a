"""Battles with planted prompt-dependent leaderboards, for the demo, the tests and the benchmarks.

Prompts come from a few topics written from templates (creative writing, arithmetic, code, ...),
and each topic has its own true BT leaderboard. The marginal leaderboard averages the topics away;
a P2L model must recover them from the prompt text. All data are generated here: nothing to ship.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.special import expit

TOPICS: dict[str, tuple[list[str], list[str]]] = {
    "creative writing": (
        [
            "Write a short poem about {x}.",
            "Compose a haiku on {x}.",
            "Tell a bedtime story about {x}.",
            "Write song lyrics about {x}.",
            "Draft a limerick featuring {x}.",
            "Describe {x} in vivid, poetic prose.",
        ],
        [
            "the sea at night",
            "an old lighthouse",
            "autumn leaves",
            "a lost cat",
            "the first snow",
            "a desert city",
            "a dragon who fears fire",
            "a robot learning to paint",
            "the moon and the tides",
            "a quiet library",
            "a summer thunderstorm",
            "an abandoned train station",
            "a garden in spring",
            "a fox in the forest",
        ],
    ),
    "arithmetic": (
        [
            "What is {x}?",
            "Compute {x} and show your steps.",
            "Calculate {x} exactly.",
            "Solve for the value of {x}.",
            "Give the numeric result of {x}.",
        ],
        [
            "17 * 23",
            "144 / 12 + 7",
            "2 to the power 10 minus 5",
            "the sum of the integers from 1 to 100",
            "3.5 * 4.2",
            "the square root of 1764",
            "15% of 240",
            "(48 - 19) * 3",
            "1001 divided by 7",
            "the product of 12, 13 and 14",
            "9 factorial divided by 7 factorial",
            "the remainder of 1000 mod 37",
        ],
    ),
    "coding": (
        [
            "Write a Python function that {x}.",
            "Fix the bug in my code that {x}.",
            "Explain how to write SQL that {x}.",
            "Implement in JavaScript a routine that {x}.",
            "Give a unit test for code that {x}.",
        ],
        [
            "reverses a linked list",
            "parses a CSV file",
            "finds duplicates in an array",
            "merges two sorted lists",
            "counts word frequencies",
            "validates an email address",
            "computes a moving average",
            "joins two tables on a key",
            "sorts records by date",
            "detects a cycle in a graph",
        ],
    ),
}

#: true leaderboards per topic over MODELS: each model is strong somewhere, weak elsewhere
MODELS = ["poet-7b", "calc-13b", "coder-34b", "generalist-70b"]
TRUE_COEFS = {
    "creative writing": np.array([1.2, -1.0, -0.6, 0.4]),
    "arithmetic": np.array([-1.0, 1.2, 0.2, 0.4]),
    "coding": np.array([-0.8, -0.2, 1.2, 0.4]),
}


def topic_prompts(topic: str) -> list[str]:
    """Every prompt the templates of ``topic`` produce."""
    templates, fillers = TOPICS[topic]
    return [t.format(x=f) for t in templates for f in fillers]


def simulate_topic_battles(n_battles: int = 4000, seed: int = 0, topics: list[str] | None = None) -> pd.DataFrame:
    """Canonical battles (prompt, model_a, model_b, winner, category) drawn from the true topic
    leaderboards under Bradley-Terry; the true coefficients are in ``TRUE_COEFS``."""
    rng = np.random.default_rng(seed)
    topics = topics or list(TOPICS)
    pool = [(t, p) for t in topics for p in topic_prompts(t)]
    pick = rng.integers(0, len(pool), n_battles)
    m = len(MODELS)
    a = rng.integers(0, m, n_battles)
    b = (a + rng.integers(1, m, n_battles)) % m
    topic = [pool[i][0] for i in pick]
    coefs = np.stack([TRUE_COEFS[t] for t in topic])
    rows = np.arange(n_battles)
    p_a = expit(coefs[rows, a] - coefs[rows, b])
    a_wins = rng.random(n_battles) < p_a
    return pd.DataFrame(
        {
            "prompt": [pool[i][1] for i in pick],
            "model_a": np.array(MODELS)[a],
            "model_b": np.array(MODELS)[b],
            "winner": np.where(a_wins, "model_a", "model_b"),
            "category": topic,
        }
    )
