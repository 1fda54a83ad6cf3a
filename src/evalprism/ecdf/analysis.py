"""The ECDF clustering analysis (seed 001): table in, :class:`EcdfResult` out."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import adjusted_mutual_info_score

from evalprism.ecdf.compare import check_comparison_options, compare_configurations
from evalprism.ecdf.k_samples import k_sample_table
from evalprism.ecdf.options import EcdfOptions
from evalprism.ecdf.result import EcdfResult, EcdfSummary
from evalprism.ecdf.scoring import DESCRIPTIONS, cosine_scores, short_reference_share
from evalprism.embed import Embedder, get_embedder
from evalprism.embed.factory import EmbedderChoice, spec_text
from evalprism.errors import EvalprismError
from evalprism.io.answers import check_choices_column, read_answers
from evalprism.io.lexical import answer_key, lexical_scores, score_answers
from evalprism.io.responses import RESPONSES_SCHEMA, check_setting_columns, configuration_label
from evalprism.keyed import content_order
from evalprism.memory import available_memory
from evalprism.progress import counted, progress_bar, status
from evalprism.stats import distinct_ecdf_count, ecdf_wins, kmedoids, mds_order, w1_matrix
from evalprism.stats.clara import CLARA_ABOVE, SortedEcdfs, check_method, kmedoids_ecdfs
from evalprism.stats.stability import choose_k_by_stability
from evalprism.vocabularies import FinalRule, ScoreRule

#: accuracy values are shown as they are up to this many distinct values, else in equal-width bins
MAX_ACCURACY_LEVELS = 6
ACCURACY_BINS = 5
#: --clusters auto measures stability on at most this many settings (whole questions, seeded)
STABILITY_MAX_SETTINGS = 3_000
#: eq. 6 distances closer than this (relative to the vectors' norm) are ties: rounding, not meaning
TIE_RTOL = 1e-9


def _natural_key(values: pd.Series) -> pd.Series:
    """Sort ids numerically when they all are numbers ('2' before '10'), else as text."""
    as_num = pd.to_numeric(values, errors="coerce")
    return as_num if as_num.notna().all() else values.astype(str)


def final_answers(
    codes: np.ndarray, vectors: np.ndarray, eligible: np.ndarray, n_settings: int, answers: Sequence[str]
) -> np.ndarray:
    """Eq. (6): per setting, the row whose embedding is nearest (L2) to the setting's mean embedding.

    Only ``eligible`` rows (responses with an answer) take part. Ties, the rule: distances equal up to
    rounding (within :data:`TIE_RTOL` times the setting's largest vector norm) are equal, and among the
    tied rows the lexicographically smallest normalised answer (``answers``, after extraction, choice
    mapping and suffix stripping) wins. Two answers given equally often tie exactly; a rule on the
    answers, not on row positions, gives the same final answer whatever the order of the rows (the
    means are summed in (setting, answer) order for the same reason).
    Returns one row index per setting, -1 where a setting has no eligible row.
    """
    rows = np.flatnonzero(eligible)
    chosen = np.full(n_settings, -1, dtype=np.int64)
    if rows.size == 0:
        return chosen
    rows = rows[content_order(codes[rows], np.asarray(answers, dtype=object)[rows])]
    c = codes[rows]
    u = vectors[rows].astype(np.float64)
    sums = np.zeros((n_settings, u.shape[1]))
    np.add.at(sums, c, u)
    counts = np.bincount(c, minlength=n_settings)
    means = sums / np.maximum(counts, 1)[:, None]
    dist = np.linalg.norm(u - means[c], axis=1)
    nearest = np.full(n_settings, np.inf)
    np.minimum.at(nearest, c, dist)
    scale = np.zeros(n_settings)
    np.maximum.at(scale, c, np.linalg.norm(u, axis=1))
    tied = np.flatnonzero(dist <= nearest[c] + TIE_RTOL * scale[c])
    # rows are in (setting, answer) order: the first tied row of a setting has the smallest answer
    settings, first = np.unique(c[tied], return_index=True)
    chosen[settings] = rows[tied[first]]
    return chosen


@dataclass(frozen=True)
class Vote:
    """The self-consistency vote of every setting: ``chosen``, the first row giving the winning answer
    (-1 where no row is eligible); ``votes``, its count; ``tied``, per setting the rows (one per
    answer) of every answer with the top count when several share it (empty: no tie)."""

    chosen: np.ndarray
    votes: np.ndarray
    tied: dict[int, np.ndarray]


def majority_answers(codes: np.ndarray, eligible: np.ndarray, n_settings: int, answers: Sequence[str]) -> Vote:
    """The self-consistency vote: per setting, the answer given most often among ``eligible`` rows,
    answers counted by :func:`evalprism.io.lexical.answer_key` (``3.0`` and ``3`` are one vote). A tie
    is kept as a tie (:attr:`Vote.tied`): ``chosen`` names the smallest key only so that a row is shown;
    whether a tied vote is right is the share of its tied answers that are (:func:`_vote_correct`), so
    no order of answers decides it."""
    chosen = np.full(n_settings, -1, dtype=np.int64)
    votes = np.zeros(n_settings, dtype=np.int64)
    rows = np.flatnonzero(eligible)
    if rows.size == 0:
        return Vote(chosen, votes, {})
    keys = pd.Series([answer_key(answers[r]) for r in rows])
    counted = (
        pd.DataFrame({"setting": codes[rows], "key": keys, "row": rows})
        .groupby(["setting", "key"], sort=True)
        .agg(votes=("row", "size"), row=("row", "min"))
        .reset_index()
        .sort_values(["setting", "votes", "key"], ascending=[True, False, True], kind="stable")
    )
    top = counted.groupby("setting")["votes"].transform("max") == counted["votes"]
    leaders = counted[top]
    first = leaders.drop_duplicates("setting")
    chosen[first["setting"].to_numpy()] = first["row"].to_numpy()
    votes[first["setting"].to_numpy()] = first["votes"].to_numpy()
    shared = leaders[leaders.duplicated("setting", keep=False)]
    tied = {int(k): g["row"].to_numpy() for k, g in shared.groupby("setting", sort=True)}
    return Vote(chosen, votes, tied)


def renumber_by_wins(
    samples: list[np.ndarray], medoids: np.ndarray, labels: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Eq. (7): order clusters by the wins of their medoid ECDFs; cluster 0 has the most wins.

    Returns ``(medoids, labels, wins)`` in the new numbering. Equal wins (equal medoid means) keep
    the earlier cluster first.
    """
    _, wins = ecdf_wins([samples[m] for m in medoids])
    order = np.argsort(-wins, kind="stable")
    new_of_old = np.empty_like(order)
    new_of_old[order] = np.arange(order.size)
    return medoids[order], new_of_old[labels], wins[order]


def _decimals_to_tell_apart(values: np.ndarray, least: int = 2, most: int = 6) -> int:
    """The fewest decimals (at least ``least``) that give distinct values distinct labels: 0.7688 and
    0.7670 are one panel "0.77" with two decimals."""
    for d in range(least, most + 1):
        if len({f"{v:.{d}f}" for v in values}) == len(values):
            return d
    return most


def _accuracy_levels(acc: pd.Series) -> pd.Series:
    """Accuracy values for the section 4.1 view: each exact value when few (labelled with enough
    decimals to tell them apart), else equal-width bins labelled with their closed/open ends."""
    values = acc.dropna().unique()
    if len(values) <= MAX_ACCURACY_LEVELS:
        d = _decimals_to_tell_apart(np.asarray(values, dtype=float))
        return acc.map(lambda a: f"{a:.{d}f}" if pd.notna(a) else None)
    edges = np.linspace(0, 1, ACCURACY_BINS + 1)
    bins = pd.cut(acc, edges, include_lowest=True)

    def label(b: pd.Interval) -> str | None:
        if pd.isna(b):
            return None
        left = max(b.left, 0.0)
        return f"{left:.1f} {'≤' if left == 0 else '<'} a ≤ {b.right:.1f}"

    return bins.map(label).astype(object)


def _check_options(
    df: pd.DataFrame, where: str, by: list[str], group: str | None, choices: str | None, clusters: int | str
) -> str | None:
    """Validate the option values against the table; return the group column actually used."""
    check_setting_columns(df, where, by)
    if group and group not in df.columns:
        if group != "group":
            raise EvalprismError(f"{where}: group column '{group}' not found")
        group = None
    if "references" in df.columns and "response" not in df.columns:
        raise EvalprismError(f"{where}: missing required column 'response' (needed with 'references')")
    check_choices_column(df, where, choices)
    return group


_REPLICATE_NAME = re.compile(r"(^|_)(id|idx|index|sample|replicate|rep|run|draw|seed|trial|epoch)s?$", re.I)


def pooled_configuration_columns(df: pd.DataFrame, by: list[str], ignore: Sequence[str | None] = ()) -> list[str]:
    """Columns that look like configurations but are not setting columns, so their values are pooled
    into one ECDF per setting: they vary within most questions while each (question, value) keeps
    several responses (a per-response measure or id does not). Few distinct values only (<= 1,000);
    replicate indices (``response_id``, ``sample``, ``seed``, ...) are not configurations."""
    skip = {"question_id", "response", "references", "score", "_row", *by, *(c for c in ignore if c)}
    n_questions = df["question_id"].nunique()
    found = []
    for col in df.columns:
        if col in skip or _REPLICATE_NAME.search(str(col)) or not 1 < df[col].nunique(dropna=False) <= 1000:
            continue
        cells = df[["question_id", col]].astype(str).drop_duplicates()
        varies_in = int((cells["question_id"].value_counts() > 1).sum())
        if 2 * varies_in >= n_questions and 2 * len(cells) <= len(df):
            found.append(str(col))
    return found


def _index_settings(
    df: pd.DataFrame, keys: list[str], where: str, notes: list[str]
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Number the settings (question x configuration) in natural order; drop rows with no response
    value, and refuse a setting left with none. Returns (rows with a ``setting`` code, settings)."""
    df = df.assign(_row=np.arange(1, len(df) + 1))  # 1-based source row, for messages after filtering
    settings = df[keys].drop_duplicates().sort_values(keys, key=_natural_key, kind="stable").reset_index(drop=True)
    if "response" in df.columns:
        null_rows = df["response"].isna()
        if null_rows.any():
            notes.append(f"{int(null_rows.sum())} rows with no response value were left out")
            df = df[~null_rows]
    kept = df[keys].drop_duplicates()
    if len(kept) < len(settings):
        lost = settings.merge(kept, how="left", indicator=True)
        first = lost[lost["_merge"] == "left_only"].iloc[0]
        label = ", ".join(f"{k}={first[k]}" for k in keys)
        raise EvalprismError(
            f"{where}: setting ({label}) has no responses (every 'response' value is missing); "
            "remove it or give its responses"
        )
    settings["setting"] = np.arange(len(settings))
    df = df.merge(settings, on=keys, how="left", validate="many_to_one")
    return df, settings


@dataclass
class _Scored:
    """Quality value per response row, plus what eq. (6) needs when responses were embedded."""

    scores: np.ndarray
    vectors: np.ndarray | None = None
    answered: np.ndarray | None = None
    answers: list[str] | None = None
    ref_lists: list[tuple[str, ...]] | None = None
    embed_stats: dict | None = None
    rule: ScoreRule = "cosine"


def _score_responses(
    df: pd.DataFrame,
    where: str,
    extract: str | None,
    choices: str | None,
    rule: ScoreRule,
    embedder: EmbedderChoice,
    cache_dir: str | Path | None,
    progress: bool,
    notes: list[str],
) -> _Scored:
    """Quality per response when references are given: eq. (3) from embeddings, or the exact/contains
    rule of :mod:`evalprism.io.lexical` (the user's ``score`` wins if both are). Responses are
    embedded whatever the rule: the final answers (eq. 6) need the embeddings."""
    user_scores = df["score"].to_numpy(dtype=np.float64) if "score" in df.columns else None
    if "references" not in df.columns:
        assert user_scores is not None
        return _Scored(scores=user_scores)
    prepared = read_answers(df, where, extract, choices or None)
    notes.extend(prepared.notes)
    answers, answered, ref_lists = prepared.texts, prepared.answered, prepared.references
    distinct_refs = list(dict.fromkeys(r for refs in ref_lists for r in refs))
    emb = get_embedder(embedder, cache_dir=cache_dir, progress=progress)
    answer_texts = [t for t, a in zip(answers, answered, strict=True) if a]
    all_vecs = emb.embed(
        answer_texts + distinct_refs, what=f"{len(answer_texts)} responses and {len(distinct_refs)} references"
    )
    vectors = np.zeros((len(df), all_vecs.shape[1]), dtype=np.float32)
    vectors[answered] = all_vecs[: len(answer_texts)]
    if user_scores is not None:
        scores = user_scores
    elif rule == "cosine":
        ref_index = {r: i for i, r in enumerate(distinct_refs)}
        scores = cosine_scores(vectors, ref_lists, ref_index, all_vecs[len(answer_texts) :], answers)
        scores[~answered] = 0.0  # a response with no answer scores 0 (documented in prepare.py)
        share = short_reference_share(ref_lists)
        if share > 0.5:
            notes.append(
                f"{share:.0%} of the distinct references are short (at most 3 words: dates, numbers, "
                "names, yes/no); cosine similarity of sentence embeddings ranks near misses of such answers "
                "above correct ones worded differently: score='exact' / --score exact (or 'contains') "
                "scores them right or wrong"
            )
    else:
        lexical = score_answers(prepared, rule, where)
        scores = lexical.values
        notes.extend(lexical.notes)
    return _Scored(scores, vectors, answered, answers, ref_lists, dict(emb.stats, model=emb.model_id), rule)


def check_distance_memory(n_settings: int, where: str) -> None:
    """Refuse, before any embedding, a distance matrix larger than the memory available: numpy would
    fail with a traceback about one huge array only after all the work before it."""
    if n_settings > CLARA_ABOVE:  # no n x n matrix there (evalprism.stats.clara)
        return
    need = n_settings * n_settings * 8
    _refuse_above_memory(
        need,
        f"{where}: {n_settings} settings need a {n_settings} x {n_settings} distance matrix of "
        f"{need / 1e9:.1f} GB (8 bytes per distance)",
        "cluster fewer settings (a sample of the questions, or fewer by columns)",
    )


def _refuse_above_memory(need: int, what: str, advice: str) -> None:
    """Refuse a run that would need ``need`` bytes, more than the machine has available: ``what`` says
    what needs them, ``advice`` what to do instead."""
    have = available_memory()
    if have is not None and need > have:
        raise EvalprismError(
            f"{what}, more memory than this machine has available ({have / 1e9:.1f} GB); {advice}", parameter="by"
        )


#: bytes per cell of the question x configuration assignment matrix while it is built and reordered
#: (pandas' pivot: a mask and the values; the array; 1-D MDS of rows and of columns: filled, centred
#: and reordered copies)
ASSIGNMENT_BYTES_PER_CELL = 48


def assignment_memory(n_questions: int, n_configurations: int) -> int:
    """Bytes the assignment matrix (:func:`_assignment`) takes at its peak: the dense cells, plus the
    SVD factors of the classical MDS above :data:`~evalprism.stats.seriation.MDS_EXACT_MAX` rows."""
    cells = n_questions * n_configurations
    svd = min(n_questions, n_configurations) * (n_questions + n_configurations) * 8
    return cells * ASSIGNMENT_BYTES_PER_CELL + svd


def check_assignment_memory(n_questions: int, n_configurations: int, where: str) -> None:
    """Refuse, before any work, a question x configuration assignment matrix larger than the memory
    available: it is dense (one cell per question and configuration, answered or not), so 100,000
    questions each answered by its own configuration make 10^10 cells, and the run used to grow past
    20 GB at the very end instead of saying so."""
    need = assignment_memory(n_questions, n_configurations)
    _refuse_above_memory(
        need,
        f"{where}: {n_questions:,} questions x {n_configurations:,} configurations make a question x "
        f"configuration assignment matrix of {n_questions * n_configurations:,} cells, about {need / 1e9:,.1f} GB "
        "to build and reorder",
        "compare fewer configurations (fewer by columns, or configurations that answer the same questions) or "
        "fewer questions",
    )


@dataclass
class _Clustering:
    """The settings' ECDFs clustered: medoids and labels numbered by wins (eq. 7) with the wins, every
    setting's W1 distance to each medoid (n x k, columns in the new numbering), the k-medoids loss,
    the K-selection curve when K was chosen, and whether the n x n matrix was avoided (CLARA)."""

    to_medoids: np.ndarray
    medoids: np.ndarray
    labels: np.ndarray
    loss: float
    wins: np.ndarray
    k_curve: pd.DataFrame | None
    scalable: bool


def _choose_k_by_stability(
    samples: list[np.ndarray],
    questions: np.ndarray,
    dist: np.ndarray | None,
    k_values: list[int],
    seed: int,
    progress: bool,
    notes: list[str],
) -> tuple[int, pd.DataFrame]:
    """K by clustering stability under resampling of questions (:mod:`evalprism.stats.stability`), on
    all settings up to STABILITY_MAX_SETTINGS, else on a seeded random subset of whole questions of
    at most that many settings (the curve's cost grows with the square of its settings)."""
    n = len(samples)
    rows = np.arange(n)
    if n > STABILITY_MAX_SETTINGS:
        rng = np.random.default_rng(seed)
        order = rng.permutation(np.unique(questions))
        sizes = np.bincount(questions)[order]
        chosen = order[: max(1, int(np.searchsorted(np.cumsum(sizes), STABILITY_MAX_SETTINGS, side="right")))]
        rows = np.flatnonzero(np.isin(questions, chosen))
        notes.append(
            f"K was chosen on a random subset of {chosen.size} questions ({rows.size} of {n} settings): "
            "stability costs grow with the square of the settings"
        )
    if dist is not None:
        sub = dist[np.ix_(rows, rows)]
    else:
        with counted(f"distances between {rows.size} ECDFs (to choose K)", "blocks", progress) as steps:
            sub = w1_matrix([samples[i] for i in rows], steps=steps)
    with progress_bar(f"choosing K in {k_values[0]}..{k_values[-1]} (stability)", len(k_values), progress) as bar:
        k, curve = choose_k_by_stability(sub, questions[rows], k_values, seed=seed, on_step=bar.update)
    return k, pd.DataFrame(curve, columns=["k", "stability", "stability_sd", "silhouette"])


def _cluster(
    samples: list[np.ndarray],
    questions: np.ndarray,
    clusters: int | str,
    method: str,
    seed: int,
    k_max: int,
    progress: bool,
    notes: list[str],
) -> _Clustering:
    """K (given or by stability; never more than the distinct ECDFs), k-medoids on the exact W1
    distances (eq. 4-5) -- the n x n matrix up to CLARA_ABOVE settings, CLARA-style n x k work above
    (:mod:`evalprism.stats.clara`) -- and wins (eq. 7)."""
    n = len(samples)
    check_cluster_range(clusters, n)
    distinct = distinct_ecdf_count(samples)
    if clusters != "auto" and int(clusters) > distinct:
        notes.append(
            f"K={clusters} was asked, but the settings have only {distinct} distinct ECDFs: more clusters "
            f"would split identical ECDFs, so K={distinct}"
        )
        clusters = distinct
    if clusters == "auto" and distinct <= 2:
        clusters = distinct
        notes.append(f"K={distinct}: the settings have only {distinct} distinct ECDF{'s' if distinct > 1 else ''}")
    k_values = list(range(2, min(k_max, n - 1, distinct) + 1)) or [2]
    scalable = n > CLARA_ABOVE
    k_curve = None
    if scalable:
        ecdfs = SortedEcdfs(samples)
        if clusters == "auto":
            clusters, k_curve = _choose_k_by_stability(samples, questions, None, k_values, seed, progress, notes)
        clara = f"k-medoids (CLARA-style, exact W1 over all {n} settings) with K={clusters}"
        with counted(clara, "samples and swap passes", progress) as steps:
            result, to_medoids = kmedoids_ecdfs(ecdfs, int(clusters), method=method, seed=seed, steps=steps)  # type: ignore[arg-type]
    else:
        with counted(f"distances between {n} ECDFs", "blocks", progress) as steps:
            dist = w1_matrix(samples, steps=steps)
        if clusters == "auto":
            clusters, k_curve = _choose_k_by_stability(samples, questions, dist, k_values, seed, progress, notes)
        with counted(f"k-medoids ({method}) with K={clusters}", "runs", progress) as steps:
            result = kmedoids(dist, int(clusters), method=method, seed=seed, steps=steps)  # type: ignore[arg-type]
        to_medoids = dist[:, result.medoids]
        del dist
    medoids, labels, wins = renumber_by_wins(samples, result.medoids, result.labels)
    order = np.array([int(np.flatnonzero(result.medoids == m)[0]) for m in medoids])
    return _Clustering(to_medoids[:, order], medoids, labels, result.loss, wins, k_curve, scalable)


def _cluster_table(
    settings: pd.DataFrame, keys: list[str], samples: list[np.ndarray], clustering: _Clustering
) -> pd.DataFrame:
    wins = clustering.wins
    rows = []
    for c, m in enumerate(clustering.medoids):
        members = np.flatnonzero(clustering.labels == c)
        rows.append(
            {
                "cluster": c,
                "size": members.size,
                "wins": int(wins[c]),
                "medoid_setting": " · ".join(f"{k}={settings[k].iat[m]}" for k in keys),
                "mean_score": float(np.concatenate([samples[i] for i in members]).mean()),
                "medoid_mean_score": float(samples[m].mean()),
                "mean_distance_to_medoid": float(clustering.to_medoids[members, c].mean()),
            }
        )
    return pd.DataFrame(rows)


def _factor_table(settings: pd.DataFrame, factors: list[str]) -> pd.DataFrame:
    """What the clusters separate: adjusted mutual information of the labels with each factor."""
    labels = settings["cluster"].to_numpy()
    return (
        pd.DataFrame(
            [
                {
                    "factor": f,
                    "levels": int(settings[f].nunique()),
                    "ami": float(adjusted_mutual_info_score(settings[f].astype(str), labels)),
                }
                for f in factors
            ]
        )
        .sort_values("ami", ascending=False, kind="stable")
        .reset_index(drop=True)
    )


#: how a large set of settings is clustered (the run details say it)
_CLARA = "CLARA-style k-medoids: FasterPAM on samples, exact W1 losses and swaps over all settings (no n x n matrix)"


def analyze(
    table: pd.DataFrame,
    options: EcdfOptions | None = None,
    *,
    embedder: Embedder | None = None,
    cache_dir: str | Path | None = None,
    progress: bool = True,
) -> EcdfResult:
    """Cluster the response-quality ECDFs of every setting (question x ``by`` columns).

    ``table`` holds one row per response: ``question_id``, ``response`` and ``references``, or a
    precomputed ``score`` (then nothing is embedded unless references are also given, which adds
    the eq. 6 final answers). ``options`` (:class:`~evalprism.ecdf.options.EcdfOptions`): ``clusters``
    is K or ``"auto"`` (K in 2..``k_max`` by clustering stability under resampling of questions,
    :mod:`evalprism.stats.stability`). ``group`` names an optional topic column for accuracy per group.
    ``score``: how a response is scored against its references, ``"cosine"`` (eq. 3, the default),
    ``"exact"`` or ``"contains"`` (0/1, see :mod:`evalprism.io.lexical`). ``final``: each setting's
    final answer, ``"medoid"`` (eq. 6, the answer nearest the mean embedding) or ``"majority"`` (the
    self-consistency vote over normalised answers); the other one is kept beside it in the settings.
    Configurations are compared pairwise (or each with ``baseline``) by paired tests over shared
    questions with ``permutations`` relabellings (:mod:`evalprism.ecdf.compare`). ``embedder``: an
    encoder object to use instead of ``options.embedding.embedder``'s spec.
    """
    o = options or EcdfOptions()
    by = list(o.by)
    encoder: EmbedderChoice = embedder if embedder is not None else o.embedding
    where = table.attrs.get("source", "responses table")
    df, settings, group, notes = _prepare(table, where, by, o.group, o.choices, o.clusters, progress)
    pooled = pooled_configuration_columns(df, by, ignore=[group, o.choices, "setting"])
    _check_against_table(df, settings, o, where)
    scored = _score_responses(df, where, o.extract, o.choices, o.score, encoder, cache_dir, progress, notes)
    df["quality"] = scored.scores
    if scored.answers is not None:
        df["answer"] = scored.answers
    samples = _samples(scored.scores, df["setting"].to_numpy(), len(settings))
    questions = pd.factorize(settings["question_id"])[0]
    clustering = _cluster(samples, questions, o.clusters, o.method, o.seed, o.k_max, progress, notes)
    settings = _settings_table(settings, df, by, group, o.choices, samples, clustering, scored, o.final)
    cluster_table = _cluster_table(settings, ["question_id", *by], samples, clustering)
    factors = ["question_id"] + (["group"] if group else []) + by + (["configuration"] if len(by) > 1 else [])
    factor_table = _factor_table(settings, factors)
    settings, accuracy = _with_accuracy(settings, by, group)
    _note_tied_votes(settings, notes)
    comparisons = _compared(settings, samples, o, pooled, notes, progress)
    return EcdfResult(
        settings=settings,
        clusters=cluster_table,
        factors=factor_table,
        accuracy=accuracy,
        comparisons=comparisons,
        k_curve=clustering.k_curve,
        assignment=_assignment(settings, o.seed),
        samples=samples,
        responses=df,
        by=by,
        options=o,
        summary=_summary(o, df, group, encoder, scored, samples, clustering),
        notes=tuple(notes),
        k_samples=k_sample_table(settings, samples),
    )


def _check_against_table(df: pd.DataFrame, settings: pd.DataFrame, o: EcdfOptions, where: str) -> None:
    """Refuse, before any embedding, options the table cannot serve: a k-medoids method for this many
    settings, a baseline that is not one of the configurations, a lexical score rule without
    references to compare with (or beside a score column, which is used as it is)."""
    by = list(o.by)
    check_method(len(settings), o.method)
    check_comparison_options(
        o.baseline,
        [configuration_label(r, by) for r in settings[by].drop_duplicates().itertuples(index=False)] if by else ["all"],
        by,
    )
    if o.score != "cosine" and ("references" not in df.columns or "score" in df.columns):
        raise EvalprismError(
            f"{where}: score '{o.score}' compares responses with their references; the table "
            f"{'has a score column, which is used as it is' if 'score' in df.columns else 'has no references column'}",
            parameter="score",
        )


def _note_tied_votes(settings: pd.DataFrame, notes: list[str]) -> None:
    """Say how many settings' majority votes are ties, and what a tie counts as."""
    if "majority_tied" in settings.columns and (settings["majority_tied"] > 0).any():
        tied = int((settings["majority_tied"] > 0).sum())
        notes.append(
            f"{tied} of {len(settings)} settings' majority votes are ties between their most frequent answers: "
            "each counts the share of its tied answers that are right (what a random tie-break gets on average), "
            "and the accuracy test leaves those questions out"
        )


def _compared(
    settings: pd.DataFrame,
    samples: list[np.ndarray],
    o: EcdfOptions,
    pooled: list[str],
    notes: list[str],
    progress: bool,
) -> pd.DataFrame | None:
    """The paired comparisons of configurations (:func:`~evalprism.ecdf.compare.compare_configurations`);
    which pairs were compared (or that none were) is said now, not only in the report."""
    said = len(notes)
    comparisons = compare_configurations(
        settings, samples, o.baseline, list(o.by), o.permutations, o.seed, notes, progress, pooled=pooled
    )
    for note in notes[said:]:
        status(note, progress)
    return comparisons


def _summary(
    o: EcdfOptions,
    df: pd.DataFrame,
    group: str | None,
    encoder: EmbedderChoice,
    scored: _Scored,
    samples: list[np.ndarray],
    clustering: _Clustering,
) -> EcdfSummary:
    """What the run resolved and counted: K, the group column used, the embedder (when responses were
    embedded), the scoring rule and quality in words, the clustering's loss and how it was computed."""
    user_scores = "score" in df.columns
    return EcdfSummary(
        k=int(clustering.medoids.size),
        group=group,
        embedder=spec_text(encoder) if scored.answers is not None else None,
        score=None if user_scores else o.score,
        quality="score column" if user_scores else DESCRIPTIONS[o.score],
        loss=clustering.loss,
        clustering=_CLARA if clustering.scalable else "k-medoids on the full W1 matrix",
        n_settings=len(samples),
        n_responses=int(sum(s.size for s in samples)),
        embedding=scored.embed_stats,
    )


def _prepare(
    table: pd.DataFrame,
    where: str,
    by: list[str],
    group: str | None,
    choices: str | None,
    clusters: int | str,
    progress: bool,
) -> tuple[pd.DataFrame, pd.DataFrame, str | None, list[str]]:
    """Validate the table and the options against it, name missing setting values, note the
    configuration columns that are pooled, and number the settings; refuse fewer than two settings
    or a distance matrix larger than memory. Returns (rows with their ``setting`` code, settings,
    the group column used, notes)."""
    df = RESPONSES_SCHEMA.validate(table)
    group = _check_options(df, where, by, group, choices, clusters)
    notes: list[str] = []
    for col in by + ([group] if group else []):
        df[col] = df[col].where(df[col].notna(), "(missing)")
    pooled = pooled_configuration_columns(df, by, ignore=[group, choices, "setting"])
    if pooled:
        notes.append(
            f"not setting columns, so pooled within each setting: {', '.join(pooled)} (they vary within "
            f"questions; add them to by=[...] / --by {' --by '.join(pooled)} to compare them)"
        )
        status(notes[-1], progress)
    df, settings = _index_settings(df, ["question_id", *by], where, notes)
    _collision_notes(df, ["question_id", *by], notes)
    if len(settings) < 2:
        raise EvalprismError(f"{where}: only {len(settings)} setting; clustering needs at least 2")
    check_distance_memory(len(settings), where)
    check_assignment_memory(settings["question_id"].nunique(), len(settings.drop_duplicates(by)) if by else 1, where)
    check_cluster_range(clusters, len(settings))  # before any embedding: a bad K used to fail after minutes of it
    return df, settings, group, notes


def check_cluster_range(clusters: int | str, n_settings: int) -> None:
    """Refuse a given K outside 1..the number of settings (known from the table, before any embedding)."""
    if clusters != "auto" and not 1 <= int(clusters) <= n_settings:
        raise EvalprismError(
            f"clusters {clusters}: K must be between 1 and the number of settings ({n_settings})", parameter="clusters"
        )


def _collision_notes(df: pd.DataFrame, keys: list[str], notes: list[str]) -> None:
    """Warn when a setting looks like several questions merged: question ids that repeat across
    datasets (0..358 and 0..102) pool their responses into one setting when no ``by`` column
    separates them. Two signs: different reference answers within one setting, and settings with
    exactly 2x, 3x, ... the usual number of responses."""
    label = ", ".join(keys)
    if "references" in df.columns:
        refs = df["references"].map(lambda r: tuple(r) if isinstance(r, list | tuple | np.ndarray) else (r,))
        per_setting = refs.groupby(df["setting"]).nunique()
        mixed = per_setting[per_setting > 1]
        if len(mixed):
            first = df.loc[df["setting"] == mixed.index[0], keys].iloc[0]
            notes.append(
                f"{len(mixed)} settings mix responses with different reference answers (first: "
                f"{', '.join(f'{k}={first[k]}' for k in keys)}): their question ids probably repeat across "
                f"datasets; add the column that tells them apart to by=[...] / --by, or make question_id "
                "unique"
            )
            return
    sizes = np.bincount(df["setting"].to_numpy())
    values, counts = np.unique(sizes, return_counts=True)
    usual = int(values[np.argmax(counts)])
    multiple = (sizes > usual) & (sizes % usual == 0)
    if usual > 1 and counts.max() >= 0.5 * sizes.size and multiple.any():
        notes.append(
            f"{int(multiple.sum())} settings have exactly 2, 3, ... times the usual {usual} responses: if "
            f"their question ids repeat across datasets, their responses were merged (settings are {label}); "
            "add the column that tells them apart to by=[...] / --by"
        )


def _samples(scores: np.ndarray, codes: np.ndarray, n_settings: int) -> list[np.ndarray]:
    """Each setting's quality values, sorted: the sample its ECDF is drawn from."""
    order = np.argsort(codes, kind="stable")
    bounds = np.cumsum(np.bincount(codes, minlength=n_settings))[:-1]
    return [np.sort(s) for s in np.split(scores[order], bounds)]


def _vote_correct(scored: _Scored, vote: Vote) -> list[bool] | list[float]:
    """Whether each setting's vote is right: 1 or 0, and for a tie the share of its tied answers that
    are right (what a random tie-break gets on average; no order of answers decides it)."""
    decided = _final_answer_correct(scored, vote.chosen)
    if not vote.tied:  # no tie anywhere: right or wrong, as the other final-answer rule is
        return decided
    out = [float(c) for c in decided]
    for setting, rows in vote.tied.items():
        out[setting] = float(np.mean(_final_answer_correct(scored, rows)))
    return out


def _final_answer_correct(scored: _Scored, chosen: np.ndarray) -> list[bool]:
    """Whether each setting's final answer (row ``chosen``, -1: none) is correct: under the exact or
    contains score, by that same rule (so a ✓ and a score of 1 always agree); under cosine, by the
    seed's exact match of the suffix-stripped answer to a reference."""
    assert scored.answers is not None and scored.ref_lists is not None
    if scored.rule == "cosine":
        return [bool(c >= 0 and scored.answers[c] in scored.ref_lists[c]) for c in chosen]
    rows = [int(c) for c in chosen if c >= 0]
    hits = lexical_scores(
        [scored.answers[c] for c in rows], np.ones(len(rows), bool), [scored.ref_lists[c] for c in rows], scored.rule
    )
    by_row = dict(zip(rows, hits, strict=True))
    return [bool(c >= 0 and by_row[int(c)] == 1.0) for c in chosen]


def _settings_table(
    settings: pd.DataFrame,
    df: pd.DataFrame,
    by: list[str],
    group: str | None,
    choices: str | None,
    samples: list[np.ndarray],
    clustering: _Clustering,
    scored: _Scored,
    final: FinalRule = "medoid",
) -> pd.DataFrame:
    """One row per setting (rows stay in setting order): configuration, sample size and mean, cluster,
    medoid flag, group, the eq. 6 final answer when responses were embedded, and the user's columns
    that are constant within each setting."""
    codes, n_settings = df["setting"].to_numpy(), len(settings)
    first_of = df.groupby("setting").first()
    settings["configuration"] = (
        [configuration_label(row, by) for row in settings[by].itertuples(index=False)] if by else "all"
    )
    settings["n_responses"] = [s.size for s in samples]
    settings["mean_score"] = [float(s.mean()) for s in samples]
    settings["cluster"] = clustering.labels
    settings["is_medoid"] = np.isin(np.arange(n_settings), clustering.medoids)
    if group:
        settings["group"] = first_of[group].to_numpy()
    if scored.answers is not None:
        assert scored.vectors is not None and scored.answered is not None and scored.ref_lists is not None
        medoid = final_answers(codes, scored.vectors, scored.answered, n_settings, scored.answers)
        vote = majority_answers(codes, scored.answered, n_settings, scored.answers)
        by_vote = _vote_correct(scored, vote)
        chosen, other = (vote.chosen, medoid) if final == "majority" else (medoid, vote.chosen)
        other_name = "medoid" if final == "majority" else "majority"
        settings["final_answer"] = [scored.answers[c] if c >= 0 else "" for c in chosen]
        settings["correct"] = by_vote if final == "majority" else _final_answer_correct(scored, chosen)
        settings[f"{other_name}_answer"] = [scored.answers[c] if c >= 0 else "" for c in other]
        settings[f"{other_name}_correct"] = _final_answer_correct(scored, other) if final == "majority" else by_vote
        settings["majority_votes"] = vote.votes
        settings["majority_tied"] = [len(vote.tied.get(k, ())) for k in range(n_settings)]
        settings["n_answered"] = np.bincount(codes, weights=scored.answered.astype(float), minlength=n_settings).astype(
            int
        )
    carried = _carried_columns(
        df,
        exclude={
            "question_id",
            *by,
            "response",
            "references",
            "score",
            "answer",
            "quality",
            "setting",
            "_row",
            group or "",
            choices or "",
        },
    )
    for col in carried:
        settings[col] = first_of[col].to_numpy()
    return settings


def _with_accuracy(
    settings: pd.DataFrame, by: list[str], group: str | None
) -> tuple[pd.DataFrame, pd.DataFrame | None]:
    """Accuracy per group x configuration (section 4.1) when final answers were judged; the settings
    gain their unit's accuracy and its level. Without final answers: the settings as they are, None."""
    if "correct" not in settings.columns:
        return settings, None
    unit = (["group"] if group else []) + (by or ["configuration"])
    accuracy = (
        settings.groupby(unit, sort=True, dropna=False)
        .agg(n_questions=("question_id", "size"), accuracy=("correct", "mean"), mean_score=("mean_score", "mean"))
        .reset_index()
    )
    settings = settings.merge(accuracy[[*unit, "accuracy"]], on=unit, how="left", validate="many_to_one")
    settings["accuracy_level"] = _accuracy_levels(settings["accuracy"])
    return settings, accuracy


def _assignment(settings: pd.DataFrame, seed: int) -> pd.DataFrame:
    """The question x configuration matrix of cluster numbers, rows and columns reordered by 1-D MDS
    (section 4.2)."""
    assignment = settings.pivot_table(index="question_id", columns="configuration", values="cluster", aggfunc="first")
    matrix = assignment.to_numpy(dtype=float)
    return assignment.iloc[mds_order(matrix, seed=seed), mds_order(matrix.T, seed=seed)]


def _carried_columns(df: pd.DataFrame, exclude: set[str]) -> list[str]:
    """User columns that are constant within every setting: carried through to settings.csv."""
    cols = [c for c in df.columns if c not in exclude]
    scalar = [c for c in cols if df[c].map(lambda v: isinstance(v, str | int | float | bool | type(None))).all()]
    if not scalar:
        return []
    counts = df.groupby("setting")[scalar].nunique(dropna=False)
    return [c for c in scalar if (counts[c] <= 1).all()]
