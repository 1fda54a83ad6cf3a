#!/usr/bin/env python
"""Held-out study of P2L configurations on real battles (issue 16, sections 3 and 4).

The battles are split by prompt with evalprism's own split (`evalprism.p2l.train.split_prompts`,
``--test-fraction`` of the distinct prompts, ``--seed``): no held-out prompt is seen in training.
Every configuration trains on the training prompts only and is scored on the held-out battles
(NLL, expected 4-class accuracy and Brier score, `evalprism.p2l.evaluate.compare_predictors`) next
to the constant predictor and two marginal leaderboards: ``marginal`` fitted on all training battles
and ``marginal_lib`` (what `evalprism p2l evaluate` compares against: the trainer's marginal, fitted
on the training battles minus its own 10% validation prompts).

Configurations (``--configs``, comma separated):

- ``lib:<backbone>[:adamw|:finetune]``: the library's trainer, `evalprism.p2l.train_model` with default
  options and ``--outcome-model`` (``lib:minilm`` is today's default, the cross-validated ridge fit;
  ``lib:minilm:adamw`` the epoch loop that was the default before, the issue's baseline;
  ``lib:minilm:finetune`` fine-tunes MiniLM; ``lib:st:/path`` any sentence-transformers directory);
  scored with `evaluate_model`.
- ``shrink:<backbone>``: the library model of ``lib:<backbone>`` with its coefficients (and raw tie
  parameter) shrunk toward its starting marginal, c = m + a (p - m), ``a`` chosen on the trainer's
  validation prompts.
- ``ridge:<spec>[+<spec>]``: an experimental linear head on frozen, cached, centred embeddings (specs
  concatenated with ``+``): bias = the marginal fit, an L2 penalty ``lam * ||W||^2`` on the
  prompt-dependent weights only (so ``lam -> inf`` *is* the marginal), full-batch L-BFGS to
  convergence; ``lam`` chosen by K-fold cross-validation over training prompts, with the marginal
  itself (``lam = inf``) a candidate, then refitted on all training battles.
- ``mlp:<spec>``: the same with a one-hidden-layer head (GELU, dropout), zero-initialised output layer,
  the penalty on the output layer, AdamW; ``lam`` and the number of epochs chosen by K-fold CV.

Feature specs: an embedder spec (``minilm``, ``st:/path``), ``static`` (the static backbone, model2vec's
distillation of MiniLM), ``len`` (surface features), and projections of the static vectors toward MiniLM's,
fitted on the *training* prompts only (their MiniLM embeddings are the target; no votes are used):
``proj:static`` (a linear map, ridge regression, closed form) and ``mlpproj:static`` (a one-hidden-layer
MLP regression, 512 GELU units, cosine loss, AdamW). The projected vectors are normalised to unit length.
Every configuration's NLL difference from the marginal and from ``lib:minilm`` (else ``ridge:minilm``) comes with
its paired standard error clustered by prompt (`evalprism.p2l.evaluate.paired_difference`).

Outputs go to ``--out/<name>/``: ``metrics.csv`` (every configuration), ``selection.csv`` (CV curves),
``fig6.csv`` (aggregation scaling of ``--fig6`` config), ``route_curve.csv`` (``--route`` config and
``--costs``). Wall times are measured on whatever else the machine is doing.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from evalprism.embed import get_embedder
from evalprism.io.battles import battle_arrays, in_content_order, read_battles
from evalprism.p2l import P2LModel, TrainOptions, evaluate_model, route_prompts, train_model
from evalprism.p2l.backbones import load_backbone
from evalprism.p2l.baseline import MarginalBaseline
from evalprism.p2l.evaluate import (
    aggregation_scaling,
    battle_nll,
    compare_predictors,
    function_distance,
    marginal_log_probs,
    paired_difference,
    prediction_log_probs,
)
from evalprism.p2l.likelihood import TORCH_OPS, log_outcome_probs
from evalprism.p2l.marginal import Leaderboard
from evalprism.p2l.model import CoefficientHead, Prediction
from evalprism.p2l.train import split_prompts
from evalprism.stats.outcome_models import get_outcome_model
from evalprism.stats.pairwise import PairCounts, fit_counts, outcome_rows, outcome_weights

torch.set_num_threads(2)


# ----------------------------------------------------------------------------------------------- data
@dataclass
class Split:
    names: list[str]
    prompts: list[str]  # distinct prompts of this side, content order
    pid: np.ndarray  # battle -> index into prompts
    a: np.ndarray
    b: np.ndarray
    rows: np.ndarray  # outcome rows (n, 4)
    w: np.ndarray  # outcome weights of the loss (n, 4)
    table: pd.DataFrame

    def subset(self, keep: np.ndarray) -> Split:
        codes, uniq = pd.factorize(self.pid[keep])
        return Split(
            self.names,
            [self.prompts[i] for i in uniq],
            codes.astype(np.int64),
            self.a[keep],
            self.b[keep],
            self.rows[keep],
            self.w[keep],
            self.table[keep].reset_index(drop=True),
        )


def make_split(table: pd.DataFrame, names: list[str], loss: str) -> Split:
    arr = battle_arrays(table, names=names, min_battles=1)
    rows = outcome_rows(arr.outcome, arr.p_b)
    w = outcome_weights(loss, rows)
    keep = w.sum(axis=1) > 0
    table = table[keep].reset_index(drop=True)
    codes, uniq = pd.factorize(table["prompt"].astype(str))
    return Split(names, list(uniq), codes.astype(np.int64), arr.a[keep], arr.b[keep], rows[keep], w[keep], table)


def marginal_fit(s: Split, loss: str) -> Leaderboard:
    pairs = PairCounts.from_battles(s.a, s.b, _outcomes(s), len(s.names))
    return Leaderboard.from_counts(pairs, loss, ci=None, names=s.names)


def _outcomes(s: Split) -> np.ndarray:
    return battle_arrays(s.table, names=s.names, min_battles=1).outcome


def prompt_hash_fold(prompts: list[str], k: int, seed: int) -> np.ndarray:
    return np.array([int(hashlib.sha256(f"{seed}\x00{p}".encode()).hexdigest()[:8], 16) % k for p in prompts])


# ----------------------------------------------------------------------------------------- features
_FEATS: dict[str, np.ndarray] = {}


def features(spec: str, prompts: list[str], cache_dir: str | None) -> np.ndarray:
    """Unit-norm embeddings of ``prompts`` (specs joined by '+' are concatenated), via evalprism's
    embedder and its cache."""
    parts = []
    for one in spec.split("+"):
        if one == "len":  # surface features of the prompt, fixed scales (no statistics of the data)
            parts.append(surface_features(prompts))
            continue
        if one == "static":
            parts.append(static_features(prompts))
            continue
        if one in ("proj:static", "mlpproj:static"):
            parts.append(projected_static(one, prompts, cache_dir))
            continue
        emb = get_embedder(one, cache_dir=cache_dir, progress=False, role="backbone")
        parts.append(emb.embed(prompts).astype(np.float32))
    return np.concatenate(parts, axis=1)


_STATIC: list = []
#: projections of the static vectors onto MiniLM's, fitted on the first prompts they are asked for
#: (the training prompts: the ridge/mlp branch asks for them before the held-out ones)
_PROJECTIONS: dict[str, object] = {}


def static_features(prompts: list[str]) -> np.ndarray:
    if not _STATIC:
        _STATIC.append(load_backbone("static", progress=True))
    return _STATIC[0].features(prompts).numpy()


def projected_static(spec: str, prompts: list[str], cache_dir: str | None) -> np.ndarray:
    """Static vectors mapped toward MiniLM's: fitted (on MiniLM's embeddings of the prompts of the first
    call, the training prompts) the first time ``spec`` is asked for, applied as fitted afterwards."""
    x = torch.from_numpy(static_features(prompts)).float()
    if spec not in _PROJECTIONS:
        y = torch.from_numpy(get_embedder("minilm", cache_dir=cache_dir, progress=False).embed(prompts)).float()
        t = time.perf_counter()
        if spec == "proj:static":
            x1 = torch.cat([x, torch.ones(len(x), 1)], dim=1)
            lam = 1e-3 * len(x)
            w = torch.linalg.solve(x1.T @ x1 + lam * torch.eye(x1.shape[1]), x1.T @ y)
            _PROJECTIONS[spec] = lambda v: torch.cat([v, torch.ones(len(v), 1)], dim=1) @ w
        else:
            torch.manual_seed(0)
            net = torch.nn.Sequential(
                torch.nn.Linear(x.shape[1], 512), torch.nn.GELU(), torch.nn.Linear(512, y.shape[1])
            )
            opt = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=1e-2)
            for _ in range(60):
                for idx in torch.randperm(len(x)).split(256):
                    loss = 1 - torch.nn.functional.cosine_similarity(net(x[idx]), y[idx]).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            net.eval()
            _PROJECTIONS[spec] = lambda v: net(v).detach()
        fitted = torch.nn.functional.normalize(_PROJECTIONS[spec](x), dim=-1)
        cos = torch.nn.functional.cosine_similarity(fitted, y).mean()
        print(
            f"    {spec}: fitted on {len(x)} training prompts in {time.perf_counter() - t:.0f}s; mean cosine to "
            f"MiniLM on them {cos:.3f}",
            flush=True,
        )
    with torch.no_grad():
        return torch.nn.functional.normalize(_PROJECTIONS[spec](x), dim=-1).numpy()


def surface_features(prompts: list[str]) -> np.ndarray:
    """log length in characters and words, log line count, a question mark, code markers; scaled so each
    column varies about as much as a few embedding dimensions together (values ~0-2)."""
    rows = []
    for p in prompts:
        code = any(t in p for t in ("```", "def ", "{", "};", "import ", "SELECT ", "<div"))
        rows.append(
            [
                np.log1p(len(p)) / 4,
                np.log1p(len(p.split())) / 4,
                np.log1p(p.count("\n")) / 2,
                float("?" in p) / 2,
                float(code) / 2,
            ]
        )
    return np.asarray(rows, dtype=np.float32)


# ------------------------------------------------------------------------------------ experimental heads
class Head(torch.nn.Module):
    """coefs, raw tie = bias + out(phi(x - mu)); out zero-initialised (starts at the marginal)."""

    def __init__(self, dim: int, n_models: int, loss: str, hidden: int = 0, dropout: float = 0.0, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.loss, self.m = loss, n_models
        self.tie = get_outcome_model(loss).extra
        n_out = n_models + int(self.tie is not None)
        self.hidden = hidden
        if hidden:
            self.inner = torch.nn.Sequential(torch.nn.Linear(dim, hidden), torch.nn.GELU(), torch.nn.Dropout(dropout))
            dim = hidden
        self.out = torch.nn.Linear(dim, n_out, bias=False)
        torch.nn.init.zeros_(self.out.weight)
        self.bias = torch.nn.Parameter(torch.zeros(n_out))

    def forward(self, x: torch.Tensor):
        h = self.inner(x) if self.hidden else x
        o = self.out(h) + self.bias
        if self.tie is None:
            return o, None
        return o[:, : self.m], self.tie.from_head(TORCH_OPS, o[:, self.m])

    def nll(self, x, pid, a, b, w):
        coefs, extra = self(x)
        rows = torch.arange(pid.shape[0])
        c = coefs[pid]
        lp = log_outcome_probs(self.loss, c[rows, a], c[rows, b], None if extra is None else extra[pid])
        return -torch.where(w > 0, w * lp, torch.zeros_like(lp)).sum() / w.sum()


def init_bias(head: Head, board: Leaderboard) -> None:
    with torch.no_grad():
        head.bias[: head.m] = torch.as_tensor(board.coefs, dtype=torch.float32)
        if head.tie is not None:
            head.bias[head.m] = head.tie.to_head(board.fit.params[-1])


def tensors(s: Split, X: np.ndarray):
    return (
        torch.as_tensor(X),
        torch.as_tensor(s.pid),
        torch.as_tensor(s.a),
        torch.as_tensor(s.b),
        torch.as_tensor(s.w, dtype=torch.float32),
    )


def fit_ridge(s: Split, X: np.ndarray, board: Leaderboard, loss: str, lam: float, iters: int = 300) -> Head:
    head = Head(X.shape[1], len(s.names), loss)
    init_bias(head, board)
    if np.isinf(lam):
        return head
    x, pid, a, b, w = tensors(s, X)
    opt = torch.optim.LBFGS(
        head.parameters(),
        lr=1,
        max_iter=iters,
        history_size=20,
        tolerance_grad=1e-6,
        tolerance_change=1e-9,
        line_search_fn="strong_wolfe",
    )

    def closure():
        opt.zero_grad()
        loss_v = head.nll(x, pid, a, b, w) + lam * (head.out.weight**2).sum()
        loss_v.backward()
        return loss_v

    opt.step(closure)
    return head


def fit_mlp(
    s: Split,
    X: np.ndarray,
    board: Leaderboard,
    loss: str,
    lam: float,
    epochs: int,
    *,
    hidden: int,
    dropout: float,
    lr: float,
    batch: int,
    seed: int,
    val: tuple | None = None,
) -> tuple[Head, list[float]]:
    """AdamW on battles in mini-batches; returns the head after ``epochs`` and the validation NLL per epoch."""
    head = Head(X.shape[1], len(s.names), loss, hidden=hidden, dropout=dropout, seed=seed)
    init_bias(head, board)
    if np.isinf(lam):
        return head, []
    x, pid, a, b, w = tensors(s, X)
    opt = torch.optim.AdamW(
        [
            {"params": head.inner.parameters(), "weight_decay": 1e-2},
            {"params": [head.out.weight, head.bias], "weight_decay": 0.0},
        ],
        lr=lr,
    )
    rng = np.random.default_rng(seed)
    curve = []
    for _ in range(epochs):
        head.train()
        order = rng.permutation(pid.shape[0])
        for st in range(0, order.size, batch):
            i = torch.as_tensor(order[st : st + batch])
            # only the prompts of this batch go through the head
            up, inv = torch.unique(pid[i], return_inverse=True)
            lv = head.nll(x[up], inv, a[i], b[i], w[i]) + lam * (head.out.weight**2).sum()
            opt.zero_grad()
            lv.backward()
            opt.step()
        if val is not None:
            curve.append(head_nll(head, *val))
    return head, curve


def head_nll(head: Head, s: Split, X: np.ndarray) -> float:
    head.eval()
    with torch.no_grad():
        return float(head.nll(*tensors(s, X)))


def head_predict(head: Head, X: np.ndarray) -> Prediction:
    head.eval()
    with torch.no_grad():
        c, e = head(torch.as_tensor(X))
    extra = None if e is None else head.tie.report(TORCH_OPS, e).double().numpy()
    return Prediction(c.double().numpy(), extra)


# ------------------------------------------------------------------------------------------- scoring
def score(loss: str, test: Split, preds: dict[str, np.ndarray]) -> pd.DataFrame:
    return compare_predictors(loss, test.rows, preds)


def pred_logp(loss: str, pred: Prediction, test: Split) -> np.ndarray:
    return prediction_log_probs(loss, pred, test.pid, test.a, test.b)


def marg_logp(loss: str, board: Leaderboard, s: Split) -> np.ndarray:
    return marginal_log_probs(MarginalBaseline.from_leaderboard(board), s.a, s.b, board.names)


# ---------------------------------------------------------------------------------------- the study
def run(args: argparse.Namespace) -> None:
    out = Path(args.out) / args.name
    out.mkdir(parents=True, exist_ok=True)
    loss = args.outcome_model
    table = in_content_order(read_battles(args.battles))
    is_test = split_prompts(table["prompt"], args.test_fraction, args.seed)
    train_tab = table[~is_test].reset_index(drop=True)
    test_tab = table[is_test].reset_index(drop=True)
    names = battle_arrays(train_tab).names
    train, test = make_split(train_tab, names, loss), make_split(test_tab, names, loss)
    print(
        f"{args.name}: {len(table)} battles; train {len(train.a)} battles / {len(train.prompts)} prompts; "
        f"held-out {len(test.a)} battles / {len(test.prompts)} prompts (grk-usable)",
        flush=True,
    )
    board = marginal_fit(train, loss)
    # the trainer's own inner split (validation prompts of the training side), reused for shrinkage
    inner_val = split_prompts(train.table["prompt"], 0.1, args.seed)
    board_lib = marginal_fit(train.subset(~inner_val), loss)

    base = score(
        loss, test, {"marginal": marg_logp(loss, board, test), "marginal_lib": marg_logp(loss, board_lib, test)}
    )
    results = [
        {
            "config": r.predictor,
            **{k: getattr(r, k) for k in ("battles", "nll", "accuracy", "brier")},
            "train_s": np.nan,
            "embed_s": np.nan,
            "note": "",
        }
        for r in base.itertuples()
    ]
    selection_rows: list[dict] = []
    heads: dict[str, tuple] = {}
    libmodels: dict[str, P2LModel] = {}

    logps: dict[str, np.ndarray] = {"marginal": marg_logp(loss, board, test)}

    def vs(config: str, other: str) -> tuple[float, float]:
        """NLL of ``config`` minus ``other``'s on the same held-out battles, SE clustered by prompt."""
        if other not in logps:
            return np.nan, np.nan
        diff = battle_nll(loss, logps[config], test.rows) - battle_nll(loss, logps[other], test.rows)
        return paired_difference(diff, test.pid)

    def add(config: str, logp: np.ndarray, train_s: float, embed_s: float = np.nan, note: str = "") -> None:
        m = compare_predictors(loss, test.rows, {config: logp}).iloc[-1]
        logps[config] = logp
        minilm = "lib:minilm" if "lib:minilm" in logps else "ridge:minilm"
        (dm, sm), (dl, sl) = vs(config, "marginal"), vs(config, minilm)
        results.append(
            {
                "config": config,
                "battles": int(m.battles),
                "nll": m.nll,
                "accuracy": m.accuracy,
                "brier": m.brier,
                "vs_marginal": dm,
                "se_vs_marginal": sm,
                "vs_lib_minilm": dl,
                "se_vs_lib_minilm": sl,
                "train_s": train_s,
                "embed_s": embed_s,
                "note": note,
            }
        )
        print(
            f"  {config:40s} NLL {m.nll:.4f} acc {m.accuracy:.4f} brier {m.brier:.4f} "
            f"vs marginal {dm:+.4f} (SE {sm:.4f}) vs {minilm} {dl:+.4f} (SE {sl:.4f}) "
            f"train {train_s:.1f}s embed {embed_s:.1f}s {note}",
            flush=True,
        )
        pd.DataFrame(results).to_csv(out / "metrics.csv", index=False)

    for config in [c for c in args.configs.split(",") if c]:
        kind, _, rest = config.partition(":")
        t0 = time.perf_counter()
        if kind in ("lib", "shrink"):
            finetune, adamw = rest.endswith(":finetune"), rest.endswith(":adamw")
            spec = rest.rsplit(":", 1)[0] if finetune or adamw else rest
            key = rest
            if key not in libmodels:
                # embeddings first (timed apart) for a frozen backbone, so train_s is the trainer's own time
                te = time.perf_counter()
                if not finetune:
                    features(spec, list(dict.fromkeys(train.prompts + test.prompts)), args.cache_dir)
                embed_s = time.perf_counter() - te
                opts = TrainOptions(
                    backbone=spec, outcome_model=loss, finetune=finetune, seed=args.seed, fit="adamw" if adamw else None
                )
                tt = time.perf_counter()
                res = train_model(train_tab, opts, cache_dir=args.cache_dir, progress=False)
                train_s = time.perf_counter() - tt
                libmodels[key] = res.model
                ev = evaluate_model(res.model, test_tab, progress=False)
                m = ev.metrics.set_index("predictor")
                print(
                    f"  [evaluate_model] {config}: "
                    + "; ".join(
                        f"{p} NLL {r.nll:.4f} acc {r.accuracy:.4f} brier {r.brier:.4f}" for p, r in m.iterrows()
                    ),
                    flush=True,
                )
                ev.metrics.assign(config=config).to_csv(out / f"evaluate_model_{_slug(config)}.csv", index=False)
                ev.scaling.to_csv(out / f"scaling_evaluate_model_{_slug(config)}.csv", index=False)
                lib_logp = prediction_log_probs(loss, res.model.predict(test.prompts), test.pid, test.a, test.b)
                add(f"lib:{key}", lib_logp, train_s, embed_s, res.summary.chosen.line())
            if kind == "shrink":
                model = libmodels[key]
                inner = train.subset(inner_val)
                p_in = model.predict(inner.prompts)
                p_te = model.predict(test.prompts)
                grid = np.round(np.arange(0, 1.0001, 0.05), 2)
                vals = []
                for al in grid:
                    vals.append(
                        compare_predictors(
                            loss, inner.rows, {"x": pred_logp(loss, shrink_pred(p_in, board_lib, al, loss), inner)}
                        )
                        .iloc[-1]
                        .nll
                    )
                    selection_rows.append({"config": config, "param": "alpha", "value": al, "cv_nll": vals[-1]})
                al = float(grid[int(np.argmin(vals))])
                add(
                    config,
                    pred_logp(loss, shrink_pred(p_te, board_lib, al, loss), test),
                    time.perf_counter() - t0,
                    note=f"alpha={al}",
                )
        elif kind in ("ridge", "mlp"):
            te = time.perf_counter()
            Xtr = features(rest, train.prompts, args.cache_dir)
            Xte = features(rest, test.prompts, args.cache_dir)
            embed_s = time.perf_counter() - te
            t0 = time.perf_counter()
            mu = Xtr.mean(axis=0, keepdims=True)
            Xtr, Xte = Xtr - mu, Xte - mu
            folds = prompt_hash_fold(train.prompts, args.folds, args.seed)[train.pid]
            if kind == "ridge":
                grid = [float(g) for g in args.ridge_grid.split(",")] + [np.inf]
                cv = {}
                for lam in grid:
                    fold_vals, fold_w = [], []
                    for f in range(args.folds):
                        tr, va = train.subset(folds != f), train.subset(folds == f)
                        btr = marginal_fit(tr, loss)
                        h = fit_ridge(tr, Xtr_of(Xtr, train, tr), btr, loss, lam)
                        fold_vals.append(head_nll(h, va, Xtr_of(Xtr, train, va)) * va.w.sum())
                        fold_w.append(va.w.sum())
                    cv[lam] = float(np.sum(fold_vals) / np.sum(fold_w))
                    selection_rows.append({"config": config, "param": "lam", "value": lam, "cv_nll": cv[lam]})
                    print(f"    {config} lam={lam:g} cv NLL {cv[lam]:.4f}", flush=True)
                lam = min(cv, key=cv.get)
                sel_s = time.perf_counter() - t0
                tf = time.perf_counter()
                head = fit_ridge(train, Xtr, board, loss, lam)
                fit_s = time.perf_counter() - tf
                heads[config] = (head, rest, mu, lam)
                add(
                    config,
                    pred_logp(loss, head_predict(head, Xte), test),
                    sel_s + fit_s,
                    embed_s,
                    f"lam={lam:g} (5-fold CV {sel_s:.0f}s + final fit {fit_s:.1f}s)",
                )
            else:
                grid = [float(g) for g in args.mlp_grid.split(",")]
                kw = {
                    "hidden": args.hidden,
                    "dropout": args.dropout,
                    "lr": args.mlp_lr,
                    "batch": args.mlp_batch,
                    "seed": args.seed,
                }
                curves = {}
                for lam in grid:
                    tot = np.zeros(args.mlp_epochs)
                    wsum = 0.0
                    for f in range(args.folds):
                        tr, va = train.subset(folds != f), train.subset(folds == f)
                        btr = marginal_fit(tr, loss)
                        _, curve = fit_mlp(
                            tr,
                            Xtr_of(Xtr, train, tr),
                            btr,
                            loss,
                            lam,
                            args.mlp_epochs,
                            val=(va, Xtr_of(Xtr, train, va)),
                            **kw,
                        )
                        tot += np.array(curve) * va.w.sum()
                        wsum += va.w.sum()
                    curves[lam] = tot / wsum
                    for e, v in enumerate(curves[lam], 1):
                        selection_rows.append({"config": config, "param": f"lam={lam:g}", "value": e, "cv_nll": v})
                    print(
                        f"    {config} lam={lam:g} cv NLL by epoch " + " ".join(f"{v:.4f}" for v in curves[lam]),
                        flush=True,
                    )
                # the marginal as a candidate: its CV NLL (per-fold marginal fits)
                mv, mw = 0.0, 0.0
                for f in range(args.folds):
                    tr, va = train.subset(folds != f), train.subset(folds == f)
                    mv += (
                        compare_predictors(loss, va.rows, {"m": marg_logp(loss, marginal_fit(tr, loss), va)})
                        .iloc[-1]
                        .nll
                        * va.w.sum()
                    )
                    mw += va.w.sum()
                best = min(((lam, e) for lam in grid for e in range(args.mlp_epochs)), key=lambda t: curves[t[0]][t[1]])
                lam, ep = best[0], best[1] + 1
                sel_s = time.perf_counter() - t0
                tf = time.perf_counter()
                if curves[lam][ep - 1] >= mv / mw:
                    head, note = Head(Xtr.shape[1], len(names), loss), "fell back to marginal"
                    init_bias(head, board)
                else:
                    head, _ = fit_mlp(train, Xtr, board, loss, lam, ep, **kw)
                    note = f"lam={lam:g} epochs={ep}"
                fit_s = time.perf_counter() - tf
                heads[config] = (head, rest, mu, lam)
                add(
                    config,
                    pred_logp(loss, head_predict(head, Xte), test),
                    sel_s + fit_s,
                    embed_s,
                    f"{note} (CV {sel_s:.0f}s + final fit {fit_s:.1f}s; marginal CV NLL {mv / mw:.4f})",
                )
        else:
            raise SystemExit(f"unknown config {config}")
        pd.DataFrame(selection_rows).to_csv(out / "selection.csv", index=False)

    if args.fig6:
        fig6(args, out, loss, test, board, heads, libmodels)
    if args.route:
        route_study(args, out, test, heads, libmodels, board)
    (out / "args.json").write_text(json.dumps(vars(args), indent=1))


def Xtr_of(Xtr: np.ndarray, full: Split, part: Split) -> np.ndarray:
    """Rows of ``Xtr`` (aligned with ``full.prompts``) for ``part.prompts``."""
    return Xtr[pd.Index(full.prompts).get_indexer(part.prompts)]


def shrink_pred(p: Prediction, board: Leaderboard, alpha: float, loss: str) -> Prediction:
    coefs = board.coefs[None, :] + alpha * (p.coefs - board.coefs[None, :])
    extra = None
    if p.extra is not None:
        ex = get_outcome_model(loss).extra
        raw_m = ex.unreport(board.extra)
        raw_p = ex.unreport(p.extra)
        raw = raw_m + alpha * (raw_p - raw_m)
        extra = ex.report(TORCH_OPS, torch.as_tensor(raw)).numpy()
    return Prediction(coefs, extra)


def _slug(s: str) -> str:
    return "".join(ch if ch.isalnum() else "_" for ch in s)


def predict_config(config: str, prompts: list[str], heads: dict, libmodels: dict, cache_dir: str | None) -> Prediction:
    if config in heads:
        head, spec, mu, _ = heads[config]
        return head_predict(head, features(spec, prompts, cache_dir) - mu)
    return libmodels[config.split(":", 1)[1]].predict(prompts)


def fig6(args, out: Path, loss: str, test: Split, board: Leaderboard, heads: dict, libmodels: dict) -> None:
    """L1 (mean |σ(θa−θb) − σ(θ*a−θ*b)|) between the eq. 3 aggregate of N held-out prompts' leaderboards and
    the held-out marginal (fitted with bt, as `evaluate_model` does, and with the study's loss)."""
    outcomes = _outcomes(test)
    pairs = PairCounts.from_battles(test.a, test.b, outcomes, len(test.names))
    present = np.unique(np.concatenate([test.a, test.b]))
    truths = {"bt": fit_counts(pairs, "bt").coefs[present], loss: fit_counts(pairs, loss).coefs[present]}
    sizes = [k for k in (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000) if k < len(test.prompts)] + [len(test.prompts)]
    frames = []
    for config in args.fig6.split(","):
        pc = predict_config(config, test.prompts, heads, libmodels, args.cache_dir).coefs[:, present]
        for tname, truth in truths.items():
            sc = aggregation_scaling(pc, truth, sizes, repeats=args.repeats, seed=args.seed)
            sc["config"], sc["truth"] = config, tname
            sc["marginal_train_l1"] = function_distance(board.coefs[present], truth)
            frames.append(sc)
    df = pd.concat(frames)
    df.to_csv(out / "fig6.csv", index=False)
    summary = df.groupby(["config", "truth", "prompts"]).agg(
        l1_mean=("l1", "mean"), l1_sd=("l1", "std"), marginal_train_l1=("marginal_train_l1", "first")
    )
    summary.to_csv(out / "fig6_summary.csv")
    print(summary.to_string(), flush=True)


def route_study(args, out: Path, test: Split, heads: dict, libmodels: dict, board: Leaderboard) -> None:
    """`evalprism.p2l.route_prompts` on the held-out prompts. A ridge head is folded into the library's own
    linear CoefficientHead (W (x − μ) + b = W x + (b − W μ)), so the library routes the very model."""
    config = args.route
    costs = pd.read_csv(args.costs)
    costs = dict(zip(costs["model"], costs["cost"].astype(float), strict=True))
    if config in heads:
        head, spec, mu, _ = heads[config]
        assert head.hidden == 0 and "+" not in spec, "routing through the library needs a linear head on one encoder"
        lib_head = CoefficientHead(head.out.weight.shape[1], head.m, args.outcome_model)
        with torch.no_grad():
            lib_head.linear.weight.copy_(head.out.weight)
            lib_head.linear.bias.copy_(head.bias - head.out.weight @ torch.as_tensor(mu[0]))
        backbone = load_backbone(spec, cache_dir=args.cache_dir, progress=False)
        model = P2LModel(backbone, lib_head, test.names, {"outcome_model": args.outcome_model}, None)
        # the folded head predicts what the study's head predicts
        chk = np.abs(
            model.predict(test.prompts[:50]).coefs
            - predict_config(config, test.prompts[:50], heads, libmodels, args.cache_dir).coefs
        ).max()
        print(f"  folded head max |diff| {chk:.2e}", flush=True)
    else:
        model = libmodels[config.split(":", 1)[1]]
    t = time.perf_counter()
    res = route_prompts(model, pd.DataFrame({"prompt": test.prompts}), costs, progress=False)
    curve = res.curve.assign(route_s=time.perf_counter() - t)
    # the marginal "router": one leaderboard for every prompt (what a router without prompt information does)
    from evalprism.p2l.router import budget_curve

    cost = np.array([costs[m] for m in test.names])
    mcurve = budget_curve(
        np.tile(board.coefs, (len(test.prompts), 1)), cost, test.names, "uniform", "average", value=model.routing_value
    )
    curve["marginal_router_winrate"] = mcurve["predicted_router_winrate"].to_numpy()
    # the same per-prompt leaderboards valued as BT win rates against a uniform opponent (grk's own value,
    # sigma(beta), is the chance of not losing to the fictitious 'bad' model and saturates near 1)
    coefs = model.leaderboards(test.prompts)
    bt = budget_curve(coefs, cost, test.names, "uniform", "average", value="bt")
    mbt = budget_curve(np.tile(board.coefs, (len(test.prompts), 1)), cost, test.names, "uniform", "average", value="bt")
    curve["bt_router_winrate"] = bt["predicted_router_winrate"].to_numpy()
    curve["bt_best_single_model"] = bt["best_single_model"].to_numpy()
    curve["bt_best_single_winrate"] = bt["predicted_best_single_winrate"].to_numpy()
    curve["bt_marginal_router_winrate"] = mbt["predicted_router_winrate"].to_numpy()
    curve.to_csv(out / "route_curve.csv", index=False)
    res.traffic.to_csv(out / "route_traffic_unconstrained.csv", index=False)
    print(curve.to_string(), flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("battles")
    p.add_argument("--name", required=True)
    p.add_argument("--out", default="out/p2l-heldout")
    p.add_argument("--configs", default="lib:minilm,ridge:minilm")
    p.add_argument("--outcome-model", "--loss", default="grk")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--test-fraction", type=float, default=0.2)
    p.add_argument("--folds", type=int, default=5)
    p.add_argument("--ridge-grid", default="0.0001,0.0003,0.001,0.003,0.01,0.03,0.1")
    p.add_argument("--mlp-grid", default="0.001,0.01,0.1")
    p.add_argument("--mlp-epochs", type=int, default=30)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--mlp-lr", type=float, default=1e-3)
    p.add_argument("--mlp-batch", type=int, default=256)
    p.add_argument("--cache-dir", default=None, help="the embedding cache (default: evalprism's own)")
    p.add_argument("--fig6", default="", help="configs (comma separated) for the aggregation scaling")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--route", default="", help="config to route the held-out prompts with")
    p.add_argument(
        "--costs",
        default=str(Path(__file__).resolve().parent.parent / "docs" / "p2l_study" / "rwq_costs.csv"),
        help="per-model cost per 1k-token response (RWQ models: exact or proxy prices, see its source column)",
    )
    run(p.parse_args())


if __name__ == "__main__":
    main()
