"""Synthetic judgments with planted disagreement clusters (demo and tests; no third-party text).

Every query asks about one subject; each query has documents of several *genres* (definition,
statistics, history, how-to, news), written from genre templates with their own vocabulary, so the
query-document pairs cluster by genre. Human labels are graded 0-3. Two simulated LLM judges copy the
human's binary decision everywhere except in planted cells:

- ``llm_strict`` under-recalls (says non-relevant where the human said relevant) inside the
  ``definition`` genre, for the queries in ``strict_queries``;
- ``llm_lenient`` over-includes (says relevant where the human said not) inside the ``news`` genre,
  for the queries in ``lenient_queries``.

``noise`` flips a share of the remaining LLM labels at random. The true genre of each pair is kept in
the ``genre`` column so tests can check that the clusters recover it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

SUBJECTS = [
    "photosynthesis",
    "inflation",
    "volcanoes",
    "the immune system",
    "black holes",
    "compound interest",
    "glaciers",
    "vaccination",
    "the stock exchange",
    "earthquakes",
    "solar panels",
    "coral reefs",
]

GENRES: dict[str, list[str]] = {
    "definition": [
        "In the dictionary, the term {s} is defined as a noun.",
        "Definition: {s} (noun) means the following, according to the glossary entry.",
        "The word {s} is defined in the encyclopedia glossary as a concept with this meaning.",
        "Glossary entry and meaning of the term {s}; see also the related definitions and synonyms.",
    ],
    "statistics": [
        "Statistics table: in 2019 the figures for {s} rose by 12 percent, with a median of 4.5 and 300 samples.",
        "According to the survey data, {s} numbers increased from 1,200 to 1,850, a 54 percent change per year.",
        "Chart of annual averages for {s}: mean 7.2, standard deviation 1.3, reported in thousands.",
        "Percentages and counts on {s} by region, 2010-2020, from the national statistics office dataset.",
    ],
    "history": [
        "Centuries ago, ancient scholars first described {s}; medieval records and nineteenth-century historians followed.",
        "The history of {s} goes back to the Roman empire and the early modern period of discovery.",
        "In 1850 a Victorian historian wrote the first chronicle about {s}, long before the twentieth century.",
        "Historical timeline of {s}: ancient origins, the middle ages, and the industrial revolution era.",
    ],
    "howto": [
        "Step 1: gather your tools. Step 2: follow this guide about {s}. Step 3: check the result and repeat.",
        "How to get started with {s}: a practical tutorial with tips, steps and common mistakes to avoid.",
        "Easy instructions: first prepare, then do the steps for {s}; our DIY tutorial shows you how.",
        "A beginner's step-by-step guide on {s} with tips and tricks; follow the steps in order.",
    ],
    "news": [
        "Breaking news: officials announced on Monday a new report about {s}, the press agency said today.",
        "Reporters said this week that the government spokesperson commented on {s} at a press conference.",
        "Latest headlines: the minister told journalists on Tuesday that {s} will be discussed in parliament.",
        "News update from our correspondent: a press release on {s} was published by the agency this morning.",
    ],
}


def simulate_judgments(
    n_queries: int = 12,
    docs_per_genre: int = 6,
    *,
    strict_queries: tuple[int, ...] = (0, 1, 2, 3),
    lenient_queries: tuple[int, ...] = (6, 7, 8),
    noise: float = 0.0,
    seed: int = 0,
) -> pd.DataFrame:
    """A judgments table (query_id, query, doc_id, doc, human, llm_strict, llm_lenient, genre)."""
    rng = np.random.default_rng(seed)
    rows = []
    for qi in range(n_queries):
        subject = SUBJECTS[qi % len(SUBJECTS)]
        query = f"what is {subject}" if qi < len(SUBJECTS) else f"what is {subject} ({qi})"
        for genre, templates in GENRES.items():
            for d in range(docs_per_genre):
                first, second = rng.choice(len(templates), size=2, replace=False)
                doc = f"{templates[first].format(s=subject)} {templates[second].format(s=subject)}"
                human = int(rng.choice([0, 1, 2, 3], p=[0.3, 0.2, 0.25, 0.25]))
                strict_cell = genre == "definition" and qi in strict_queries
                lenient_cell = genre == "news" and qi in lenient_queries
                if strict_cell and human < 2:
                    human = int(rng.choice([2, 3]))  # every pair of the cell relevant, so the misses show
                if lenient_cell and human >= 2:
                    human = int(rng.choice([0, 1]))  # every pair of the cell non-relevant, so the extras show
                relevant = int(human >= 2)
                strict = 0 if strict_cell else relevant  # under-recall: relevant judged non-relevant
                lenient = 1 if lenient_cell else relevant  # over-inclusion
                flip = rng.random(2) < noise
                strict = strict ^ int(flip[0])
                lenient = lenient ^ int(flip[1])
                rows.append(
                    {
                        "query_id": f"q{qi:02d}",
                        "query": query,
                        "doc_id": f"q{qi:02d}-{genre}-{d}",
                        "doc": doc,
                        "human": human,
                        "llm_strict": strict,
                        "llm_lenient": lenient,
                        "genre": genre,
                    }
                )
    return pd.DataFrame(rows)


def genre_embeddings(table: pd.DataFrame, dim: int = 16, spread: float = 0.05, seed: int = 0) -> np.ndarray:
    """Unit vectors around one random centre per genre: a stand-in for a text embedder whose
    clusters are known exactly (tests of the clustering and agreement steps)."""
    rng = np.random.default_rng(seed)
    genres = pd.factorize(table["genre"])[0]
    centres = rng.normal(size=(genres.max() + 1, dim))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    x = centres[genres] + spread * rng.normal(size=(len(table), dim))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)
