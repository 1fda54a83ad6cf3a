"""The ECDF clustering analysis (seed 001): table in, :class:`EcdfResult` out."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

import numpy as np
import pandas as pd
from sklearn.metrics import adjusted_mutual_info_score

from evalprism.ecdf.prepare import compile_extractor, parse_choices, prepare_responses, strip_suffixes
from evalprism.ecdf.result import EcdfResult
from evalprism.embed import Embedder, get_embedder
from evalprism.errors import EvalprismError
from evalprism.io.schema import Column, Schema
from evalprism.progress import progress_bar, status
from evalprism.stats import choose_k, ecdf_wins, kmedoids, mds_order, w1_matrix

RESPONSES_SCHEMA = Schema(
    name="responses",
    columns=(
        Column("question_id", "key", description="question identifier"),
        Column("response", "str", required=False, nullable=True, description="one response text"),
        Column("references", "str_list", required=False, description="reference answers (list or JSON list)"),
        Column("score", "number", required=False, description="a precomputed quality value per response"),
    ),
    one_of=(("references", "score"),),
)

#: accuracy values are shown as they are up to this many distinct values, else in equal-width bins
MAX_ACCURACY_LEVELS = 6
ACCURACY_BINS = 5
DEFAULT_K_MAX = 16


def _natural_key(values: pd.Series) -> pd.Series:
    """Sort ids numerically when they all are numbers ('2' before '10'), else as text."""
    as_num = pd.to_numeric(values, errors="coerce")
    return as_num if as_num.notna().all() else values.astype(str)


def _config_label(values: Sequence[object], by: Sequence[str]) -> str:
    if not by:
        return "all"
    return " · ".join(f"{c}={v}" for c, v in zip(by, values, strict=True))


def _cosine_max(resp_vecs: np.ndarray, ref_lists: list[tuple[str, ...]], ref_index: dict[str, int],
                ref_vecs: np.ndarray) -> np.ndarray:
    """Eq. (3): each response's maximum cosine similarity to its own references (unit vectors)."""
    out = np.empty(len(ref_lists), dtype=np.float64)
    by_refs: dict[tuple[str, ...], list[int]] = {}
    for row, refs in enumerate(ref_lists):
        by_refs.setdefault(refs, []).append(row)
    for refs, rows in by_refs.items():
        refs_mat = ref_vecs[[ref_index[r] for r in refs]]
        sims = resp_vecs[rows] @ refs_mat.T
        out[rows] = sims.max(axis=1)
    return np.clip(out, -1.0, 1.0)


def final_answers(codes: np.ndarray, vectors: np.ndarray, eligible: np.ndarray, n_settings: int) -> np.ndarray:
    """Eq. (6): per setting, the row whose embedding is nearest (L2) to the setting's mean embedding.

    Only ``eligible`` rows (responses with an answer) take part; the earliest row wins ties.
    Returns one row index per setting, -1 where a setting has no eligible row.
    """
    rows = np.flatnonzero(eligible)
    chosen = np.full(n_settings, -1, dtype=np.int64)
    if rows.size == 0:
        return chosen
    c = codes[rows]
    u = vectors[rows].astype(np.float64)
    sums = np.zeros((n_settings, u.shape[1]))
    np.add.at(sums, c, u)
    counts = np.bincount(c, minlength=n_settings)
    means = sums / np.maximum(counts, 1)[:, None]
    dist = np.linalg.norm(u - means[c], axis=1)
    order = np.lexsort((rows, dist, c))
    first = np.ones(order.size, dtype=bool)
    first[1:] = c[order][1:] != c[order][:-1]
    chosen[c[order][first]] = rows[order][first]
    return chosen


def renumber_by_wins(samples: list[np.ndarray], medoids: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Eq. (7): order clusters by the wins of their medoid ECDFs; cluster 0 has the most wins.

    Returns ``(medoids, labels, wins)`` in the new numbering. Equal wins (equal medoid means) keep
    the earlier cluster first.
    """
    _, wins = ecdf_wins([samples[m] for m in medoids])
    order = np.argsort(-wins, kind="stable")
    new_of_old = np.empty_like(order)
    new_of_old[order] = np.arange(order.size)
    return medoids[order], new_of_old[labels], wins[order]


def _accuracy_levels(acc: pd.Series) -> pd.Series:
    """Accuracy values for the section 4.1 view: as they are when few, else equal-width bins."""
    values = acc.dropna().unique()
    if len(values) <= MAX_ACCURACY_LEVELS:
        return acc.map(lambda a: f"{a:.2f}" if pd.notna(a) else None)
    edges = np.linspace(0, 1, ACCURACY_BINS + 1)
    bins = pd.cut(acc, edges, include_lowest=True)
    return bins.map(lambda b: f"{max(b.left, 0.0):.1f}–{b.right:.1f}" if pd.notna(b) else None).astype(object)


def analyze(
    table: pd.DataFrame,
    *,
    by: Sequence[str] = (),
    clusters: int | Literal["auto"] = "auto",
    embedder: str | Embedder = "minilm",
    method: Literal["fasterpam", "pam"] = "fasterpam",
    seed: int = 0,
    extract: str | None = None,
    choices: str | None = None,
    group: str | None = "group",
    k_max: int = DEFAULT_K_MAX,
    cache_dir: str | None = None,
    progress: bool = True,
) -> EcdfResult:
    """Cluster the response-quality ECDFs of every setting (question x ``by`` columns).

    ``table`` holds one row per response: ``question_id``, ``response`` and ``references``, or a
    precomputed ``score`` (then nothing is embedded unless references are also given, which adds
    the eq. 6 final answers). ``clusters`` is K or ``"auto"`` (K in 2..``k_max`` with the highest
    mean silhouette). ``group`` names an optional topic column for accuracy per group.
    """
    where = table.attrs.get("source", "responses table")
    df = RESPONSES_SCHEMA.validate(table)
    by = list(by)
    for col in by:
        if col not in df.columns:
            raise EvalprismError(f"{where}: --by column '{col}' not found (columns: {', '.join(map(str, df.columns))})")
        if col in ("question_id", "response", "references", "score"):
            raise EvalprismError(f"--by '{col}': a setting column cannot be one of the canonical columns")
    if group and group not in df.columns:
        if group != "group":
            raise EvalprismError(f"{where}: group column '{group}' not found")
        group = None
    use_refs = "references" in df.columns
    use_score = "score" in df.columns
    if use_refs and "response" not in df.columns:
        raise EvalprismError(f"{where}: missing required column 'response' (needed with 'references')")
    if choices and choices not in df.columns:
        raise EvalprismError(f"{where}: choices column '{choices}' not found")
    if isinstance(clusters, str) and clusters != "auto":
        raise EvalprismError(f"--clusters: expected a whole number or 'auto', got '{clusters}'")
    extractor = compile_extractor(extract)
    notes: list[str] = []

    for col in by + ([group] if group else []):
        df[col] = df[col].where(df[col].notna(), "(missing)")
    keys = ["question_id", *by]
    settings = df[keys].drop_duplicates().sort_values(keys, key=_natural_key, kind="stable").reset_index(drop=True)
    if "response" in df.columns:
        null_rows = df["response"].isna()
        if null_rows.any():
            notes.append(f"{int(null_rows.sum())} rows with no response value were left out")
            df = df[~null_rows].reset_index(drop=True)
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
    codes = df["setting"].to_numpy()
    n_settings = len(settings)

    # ---- quality value per response: eq. (3) or the user's score --------------------------------
    texts = answered = None
    vectors = None
    if use_refs:
        choice_maps = (
            [parse_choices(v, f"{where}: row {i + 1}, column '{choices}'") for i, v in enumerate(df[choices])]
            if choices
            else [None] * len(df)
        )
        texts, answered = prepare_responses(df["response"].astype(str), extractor, choice_maps)
        answered = np.asarray(answered)
        if extractor is not None:
            misses = int((~answered).sum())
            if misses:
                notes.append(f"{misses} of {len(df)} responses had no match for --extract and score 0")
        ref_lists = [tuple(strip_suffixes(r) for r in refs) for refs in df["references"]]
        distinct_refs = list(dict.fromkeys(r for refs in ref_lists for r in refs))
        ref_index = {r: i for i, r in enumerate(distinct_refs)}
        emb = get_embedder(embedder, cache_dir=cache_dir, progress=progress)
        answer_texts = [t for t, a in zip(texts, answered, strict=True) if a]
        status(f"embedding {len(answer_texts)} responses and {len(distinct_refs)} references with {emb.spec}", progress)
        all_vecs = emb.embed(answer_texts + distinct_refs)
        embed_stats = dict(emb.stats, model=emb.model_id)
        ref_vecs = all_vecs[len(answer_texts):]
        vectors = np.zeros((len(df), all_vecs.shape[1]), dtype=np.float32)
        vectors[answered] = all_vecs[: len(answer_texts)]
        if not use_score:
            scores = _cosine_max(vectors, ref_lists, ref_index, ref_vecs)
            scores[~answered] = 0.0
        df["answer"] = texts
    else:
        embed_stats = None
    if use_score:
        scores = df["score"].to_numpy(dtype=np.float64)
    df["quality"] = scores

    samples = [np.sort(s) for s in np.split(scores[np.argsort(codes, kind="stable")], np.cumsum(np.bincount(codes, minlength=n_settings))[:-1])]

    # ---- distances and clustering (eq. 4-5, Algorithm 1 / FasterPAM, eq. 7) --------------------
    if n_settings < 2:
        raise EvalprismError(f"{where}: only {n_settings} setting; clustering needs at least 2")
    status(f"distances between {n_settings} ECDFs", progress)
    dist = w1_matrix(samples)
    k_curve = None
    if clusters == "auto":
        k_values = list(range(2, min(k_max, n_settings - 1) + 1)) or [min(2, n_settings)]
        with progress_bar(f"choosing K in {k_values[0]}..{k_values[-1]} (silhouette)", len(k_values), progress) as bar:
            k, curve = choose_k(dist, k_values, method=method, seed=seed, on_step=bar.update)
        k_curve = pd.DataFrame(curve, columns=["k", "silhouette", "loss"])
    else:
        k = int(clusters)
        if k < 1 or k > n_settings:
            raise EvalprismError(f"--clusters {k}: K must be between 1 and the number of settings ({n_settings})")
    status(f"k-medoids ({method}) with K={k}", progress)
    medoids, labels, loss = kmedoids(dist, k, method=method, seed=seed)
    medoids, labels, wins = renumber_by_wins(samples, medoids, labels)

    # ---- per-setting table ----------------------------------------------------------------------
    settings["configuration"] = [_config_label(row, by) for row in settings[by].itertuples(index=False)] if by else "all"
    settings["n_responses"] = [s.size for s in samples]
    settings["mean_score"] = [float(s.mean()) for s in samples]
    settings["cluster"] = labels
    settings["is_medoid"] = False
    settings.loc[medoids, "is_medoid"] = True
    if group:
        settings = settings.merge(df.groupby("setting")[group].first().rename("group"), left_on="setting", right_index=True)
    if use_refs:
        assert vectors is not None and answered is not None
        chosen = final_answers(codes, vectors, answered, n_settings)
        answers = df["answer"].to_numpy(dtype=object)
        ref_sets = [set(r) for r in ref_lists]
        settings["final_answer"] = [answers[c] if c >= 0 else "" for c in chosen]
        settings["correct"] = [bool(c >= 0 and answers[c] in ref_sets[c]) for c in chosen]
        settings["n_answered"] = np.bincount(codes, weights=answered.astype(float), minlength=n_settings).astype(int)
    carried = _carried_columns(df, exclude=set(keys) | {"response", "references", "score", "answer", "quality",
                                                         "setting", group or "", choices or ""})
    if carried:
        settings = settings.merge(df.groupby("setting")[carried].first(), left_on="setting", right_index=True)

    # ---- cluster table ---------------------------------------------------------------------------
    cluster_rows = []
    for c, m in enumerate(medoids):
        members = np.flatnonzero(labels == c)
        pooled = np.concatenate([samples[i] for i in members])
        cluster_rows.append({
            "cluster": c,
            "size": members.size,
            "wins": int(wins[c]),
            "medoid_setting": _setting_label(settings.iloc[m], keys),
            "mean_score": float(pooled.mean()),
            "medoid_mean_score": float(samples[m].mean()),
            "mean_distance_to_medoid": float(dist[members, m].mean()),
        })
    cluster_table = pd.DataFrame(cluster_rows)

    # ---- what the clusters separate: adjusted mutual information with each factor ---------------
    factors = ["question_id"] + (["group"] if group else []) + by + (["configuration"] if len(by) > 1 else [])
    factor_table = pd.DataFrame([
        {"factor": f, "levels": int(settings[f].nunique()),
         "ami": float(adjusted_mutual_info_score(settings[f].astype(str), labels))}
        for f in factors
    ]).sort_values("ami", ascending=False, kind="stable").reset_index(drop=True)

    # ---- accuracy per group x configuration (section 4.1) ---------------------------------------
    accuracy = None
    if use_refs:
        unit = (["group"] if group else []) + (by or ["configuration"])
        accuracy = (settings.groupby(unit, sort=True, dropna=False)
                    .agg(n_questions=("question_id", "size"), accuracy=("correct", "mean"),
                         mean_score=("mean_score", "mean"))
                    .reset_index())
        settings = settings.merge(accuracy[unit + ["accuracy"]], on=unit, how="left")
        settings["accuracy_level"] = _accuracy_levels(settings["accuracy"])

    # ---- assignment matrix reordered by 1-D MDS (section 4.2) -----------------------------------
    assignment = settings.pivot_table(index="question_id", columns="configuration", values="cluster", aggfunc="first")
    row_order = mds_order(assignment.to_numpy(dtype=float), seed=seed)
    col_order = mds_order(assignment.to_numpy(dtype=float).T, seed=seed)
    assignment = assignment.iloc[row_order, col_order]

    settings = settings.sort_values("setting", kind="stable").reset_index(drop=True)
    return EcdfResult(
        settings=settings,
        clusters=cluster_table,
        factors=factor_table,
        accuracy=accuracy,
        k_curve=k_curve,
        assignment=assignment,
        samples=samples,
        responses=df,
        by=by,
        options={
            "by": by, "clusters": clusters, "k": int(k), "method": method, "seed": seed, "extract": extract,
            "choices": choices, "group": group, "embedder": None if not use_refs else getattr(embedder, "spec", embedder),
            "quality": "score column" if use_score else "max cosine similarity to references (eq. 3)",
            "loss": loss,
        },
        embed_stats=embed_stats,
        notes=notes,
    )


def _setting_label(row: pd.Series, keys: Sequence[str]) -> str:
    return " · ".join(f"{k}={row[k]}" for k in keys)


def _carried_columns(df: pd.DataFrame, exclude: set[str]) -> list[str]:
    """User columns that are constant within every setting: carried through to settings.csv."""
    cols = [c for c in df.columns if c not in exclude and not re.match(r"^_", str(c))]
    if not cols:
        return []
    hashable = [c for c in cols if df[c].map(lambda v: isinstance(v, str | int | float | bool | type(None))).all()]
    if not hashable:
        return []
    counts = df.groupby("setting")[hashable].nunique(dropna=False)
    return [c for c in hashable if (counts[c] <= 1).all()]
