"""The P2L checkpoints lmarena released, loaded as an evalprism :class:`~evalprism.p2l.model.P2LModel`.

lmarena's training code (repository lmarena/p2l, ``p2l/model.py``, ``p2l/train.py``,
``p2l/endpoint.py``) writes a Hugging Face directory:

- ``config.json`` and ``model.safetensors`` (or shards with ``model.safetensors.index.json``) of a
  ``P2LModel``: a Qwen2 or Llama base model without LM head under ``model.*`` and the head under
  ``head.*``: ``head.head`` (one linear layer with one output per model, or two linear layers
  ``head.head.0``/``head.head.1`` when a ``linear_head_downsize_factor`` was used) and, for the rk/grk
  heads, ``head.eta_head`` (the tie parameter's raw output);
- ``model_list.json``: the model names in coefficient order;
- a tokenizer with an added CLS token (and a chat template); ``training_config.json`` (the
  training options, ``loss_type`` among them).

A prompt is formatted as lmarena's data collator (``p2l/dataset.py``, ``DataCollator``) formats a
training prompt: each user turn is its own user message of the chat template (a one-turn prompt
one message; a multi-turn :class:`~evalprism.io.battles.Conversation`, as the service and the
battle readers make of a conversation, one message per user turn, in order, the assistant turns
left out, as lmarena's router sends every user message's content to its endpoint, ``route/routers.py``),
any CLS token inside it is replaced by ``<cls>``, the CLS token is appended, the text is tokenized
without further special tokens and truncated from the left to ``max_length`` tokens (their
endpoint's 8192), and the base model's hidden state at the CLS position feeds the head.

No BOS token is added beyond what the chat template writes, as in lmarena's training collator. Their
serving endpoint (``p2l/endpoint.py``) tokenizes the templated text with the tokenizer's default
special tokens instead, which for a Llama-type tokenizer puts a second BOS before the template's own;
Qwen2 tokenizers add none, so for the Qwen2-based checkpoints the two agree, while a Llama-based
checkpoint reads here as it was trained, one token shorter than their endpoint reads it.

The tie parameter. lmarena's losses map the eta head's output ``e`` (n,) onto the tie parameter
differently from evalprism's head (:meth:`TieParameter.from_head
<evalprism.stats.outcome_models.TieParameter.from_head>`), so the released head applies lmarena's
map and hands evalprism's outcome-model registry the raw value with the same probabilities:

- ``rk`` (``RK_Loss``): η = max(softplus_β(e − 22.5), 0.02) with β = 0.1 (torch's
  ``softplus(x, beta)`` = log(1 + exp(β x)) / β); evalprism's raw rk value is η itself.
- ``grk`` (``GRK_loss``, also registered as ``bag``): θ = exp(e) + 1.000001 in eq. 8; evalprism's
  grk has λ = 1 + exp(s), so s = log(θ − 1) = log(exp(e) + 1e-6), and λ = θ.

The loss comes from ``training_config.json`` (``loss_type``; ``bag`` is grk, ``bt_tie`` bt-tie).
Without that file a head without eta head is read as bt-tie (lmarena's released BT models trained
with it; bt and bt-tie give the same coefficients and routing), and a head with one is refused:
rk and grk heads have the same shape and cannot be told apart.

Everything is read and checked (model list against the head, head shapes against the base model,
the CLS token, the chat template) before the base model's weights load. Nothing is downloaded.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors import safe_open
from torch import nn

from evalprism.errors import EvalprismError
from evalprism.io.battles import prompt_turns
from evalprism.p2l.backbones import Backbone, inference_dtype, resolve_runtime
from evalprism.p2l.head import HEAD_FILE, LeaderboardHead
from evalprism.progress import progress_bar
from evalprism.vocabularies import OutcomeModelName

__all__ = ["LmarenaBackbone", "LmarenaHead", "is_lmarena_checkpoint", "load_lmarena"]

MODEL_LIST_FILE = "model_list.json"
TRAINING_CONFIG_FILE = "training_config.json"
WEIGHTS_FILE = "model.safetensors"
WEIGHTS_INDEX_FILE = "model.safetensors.index.json"
#: lmarena's endpoint truncates prompts (from the left) to this many tokens
DEFAULT_MAX_LENGTH = 8192
#: what replaces a CLS token inside a prompt (lmarena's data collator), so that only the appended one is CLS
CLS_STAND_IN = "<cls>"
#: lmarena's ``loss_type`` names -> evalprism's outcome models (``bag`` is their first name for grk)
LOSS_TYPES: dict[str, OutcomeModelName] = {
    "bt": "bt",
    "bt-tie": "bt-tie",
    "bt_tie": "bt-tie",
    "rk": "rk",
    "grk": "grk",
    "bag": "grk",
}
#: the outcome model of a head without eta head when no training config names one (same coefficients as bt)
ETA_FREE_DEFAULT: OutcomeModelName = "bt-tie"

# lmarena's maps of the eta head's output onto the tie parameter (p2l/model.py: RK_Loss, GRK_loss)
RK_SHIFT, RK_BETA, RK_FLOOR = 22.5, 0.1, 0.02
GRK_THETA_OFFSET = 1.000001


def _rk_eta(out: torch.Tensor) -> torch.Tensor:
    """η of lmarena's rk loss: clamp(softplus(e − 22.5, β=0.1), min=0.02), evalprism's raw rk value."""
    return torch.clamp(nn.functional.softplus(out - RK_SHIFT, RK_BETA), min=RK_FLOOR)


def _grk_raw(out: torch.Tensor) -> torch.Tensor:
    """evalprism's raw grk value s with 1 + exp(s) = lmarena's θ = exp(e) + 1.000001: log(exp(e) + 1e-6)."""
    return torch.logaddexp(out, torch.full_like(out, math.log(GRK_THETA_OFFSET - 1.0)))


#: per outcome model with a tie parameter: lmarena's eta output -> evalprism's raw tie parameter
ETA_TO_RAW: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"rk": _rk_eta, "grk": _grk_raw}


def is_lmarena_checkpoint(directory: str | Path) -> bool:
    """Whether ``directory`` is in lmarena's layout: a ``model_list.json`` and no evalprism head file."""
    directory = Path(directory)
    return (directory / MODEL_LIST_FILE).is_file() and not (directory / HEAD_FILE).exists()


def invalid_checkpoint(directory: str | Path, what: str) -> EvalprismError:
    """The one message for a released-layout directory that cannot be used."""
    return EvalprismError(f"{directory}: not a usable lmarena P2L checkpoint: {what}")


# ---------------------------------------------------------------------------------------------
# the head
# ---------------------------------------------------------------------------------------------


def _layers(directory: Path, state: dict[str, torch.Tensor], name: str) -> list[nn.Linear]:
    """The linear layers stored under ``head.<name>``: one (``.weight``, ``.bias``) or two (``.0.``,
    ``.1.``, lmarena's ``linear_head_downsize_factor``); none when absent."""
    if f"head.{name}.weight" in state:
        prefixes = [f"head.{name}."]
    elif any(k.startswith(f"head.{name}.") for k in state):
        prefixes = [f"head.{name}.0.", f"head.{name}.1."]
    else:
        return []
    layers = []
    for prefix in prefixes:
        weight, bias = state.get(prefix + "weight"), state.get(prefix + "bias")
        if weight is None or weight.ndim != 2 or (bias is not None and bias.shape != weight.shape[:1]):
            raise invalid_checkpoint(
                directory,
                f"'head.{name}' is not a linear layer or two (no matrix '{prefix}weight' with a matching bias)",
            )
        layer = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
        with torch.no_grad():
            layer.weight.copy_(weight)
            if bias is not None:
                layer.bias.copy_(bias)
        layers.append(layer)
    return layers


class LmarenaHead(LeaderboardHead):
    """lmarena's coefficient head (``head.head``) and eta head (``head.eta_head``), their outputs
    turned into evalprism's coefficients and raw tie parameter by lmarena's own maps (module
    docstring), so that the registry's probabilities are lmarena's."""

    def __init__(self, coef: nn.Module, eta: nn.Module | None, n_models: int, outcome_model: OutcomeModelName) -> None:
        super().__init__(n_models, outcome_model)
        self.coef = coef
        self.eta = eta if self.has_extra else None
        self.eta_to_raw = ETA_TO_RAW.get(outcome_model)

    def forward(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        coefs = self.coef(features)
        if self.eta is None or self.eta_to_raw is None:
            return coefs, None
        return coefs, self.eta_to_raw(self.eta(features)[:, 0])


@dataclass(frozen=True)
class HeadWeights:
    """The head read from the checkpoint: coefficient and eta layers, and their description."""

    coef: list[nn.Linear]
    eta: list[nn.Linear] | None

    @property
    def shape(self) -> str:
        return "two-layer" if len(self.coef) == 2 else "linear"


def _read_head(directory: Path, hidden: int, models: list[str]) -> HeadWeights:
    """The ``head.*`` tensors (float32) from the checkpoint's safetensors file(s), checked against
    the model list and the base model's hidden size."""
    state = _head_tensors(directory)
    if "head.gamma_head.weight" in state:
        raise invalid_checkpoint(
            directory,
            "the head has a gamma head (lmarena's 'ba' loss), which evalprism's outcome models do not include",
        )
    coef = _layers(directory, state, "head")
    if not coef:
        found = ", ".join(sorted(state)) or "no head.* tensors"
        raise invalid_checkpoint(
            directory,
            f"cannot infer the head type: no coefficient head 'head.head' (a linear "
            f"layer or two) in the weights (found {found})",
        )
    eta = _layers(directory, state, "eta_head") or None
    if coef[-1].out_features != len(models):
        raise invalid_checkpoint(
            directory,
            f"{MODEL_LIST_FILE} names {len(models)} models but the coefficient "
            f"head 'head.head' has {coef[-1].out_features} outputs",
        )
    for name, layers in (("head.head", coef), ("head.eta_head", eta or [])):
        if layers and (
            layers[0].in_features != hidden
            or any(a.out_features != b.in_features for a, b in itertools.pairwise(layers))
        ):
            shapes = " -> ".join(f"{layer.in_features}x{layer.out_features}" for layer in layers)
            raise invalid_checkpoint(
                directory, f"'{name}' ({shapes}) does not fit the base model's hidden size {hidden}"
            )
    if eta is not None and eta[-1].out_features != 1:
        raise invalid_checkpoint(directory, f"'head.eta_head' has {eta[-1].out_features} outputs, expected 1")
    return HeadWeights(coef, eta)


def _head_tensors(directory: Path) -> dict[str, torch.Tensor]:
    """Every ``head.*`` tensor of the checkpoint as float32, reading only the file(s) that hold them."""
    index = directory / WEIGHTS_INDEX_FILE
    try:
        if index.is_file():
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
            files = sorted({f for k, f in weight_map.items() if k.startswith("head.")})
        elif (directory / WEIGHTS_FILE).is_file():
            files = [WEIGHTS_FILE]
        else:
            raise invalid_checkpoint(
                directory, f"no {WEIGHTS_FILE} or {WEIGHTS_INDEX_FILE} (lmarena's checkpoints are saved as safetensors)"
            )
        state: dict[str, torch.Tensor] = {}
        for name in files:
            with safe_open(str(directory / name), framework="pt") as f:
                # safe_open has keys() but is not iterable
                state.update({k: f.get_tensor(k).float() for k in f.keys() if k.startswith("head.")})  # noqa: SIM118
    except EvalprismError:
        raise
    except Exception as exc:
        raise invalid_checkpoint(directory, f"the weights cannot be read ({type(exc).__name__}: {exc})") from None
    if not all(bool(torch.isfinite(t).all()) for t in state.values()):
        raise invalid_checkpoint(directory, "the head holds NaN or infinite weights")
    return state


def _sequential(layers: list[nn.Linear]) -> nn.Module:
    return layers[0] if len(layers) == 1 else nn.Sequential(*layers)


# ---------------------------------------------------------------------------------------------
# the checkpoint's own files
# ---------------------------------------------------------------------------------------------


def _read_json(directory: Path, name: str) -> Any:
    try:
        return json.loads((directory / name).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise invalid_checkpoint(directory, f"{name} cannot be read ({type(exc).__name__}: {exc})") from None
    except json.JSONDecodeError as exc:
        raise invalid_checkpoint(
            directory, f"{name} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None


def read_model_list(directory: Path) -> list[str]:
    """The checkpoint's model names in coefficient order (``model_list.json``), checked."""
    models = _read_json(directory, MODEL_LIST_FILE)
    if not isinstance(models, list) or not models or not all(isinstance(m, str) and m for m in models):
        raise invalid_checkpoint(directory, f"{MODEL_LIST_FILE} must be a non-empty JSON list of model names")
    if len(set(models)) != len(models):
        raise invalid_checkpoint(directory, f"{MODEL_LIST_FILE} names a model twice")
    return models


def _base_config(directory: Path) -> dict[str, Any]:
    """The base model's ``config.json``, with a positive ``hidden_size``."""
    if not (directory / "config.json").is_file():
        raise invalid_checkpoint(directory, "config.json (the base model's configuration) is missing")
    config = _read_json(directory, "config.json")
    hidden = config.get("hidden_size") if isinstance(config, dict) else None
    if not isinstance(hidden, int) or hidden <= 0:
        raise invalid_checkpoint(directory, "config.json has no 'hidden_size'")
    return config


def _infer_outcome_model(directory: Path, head: HeadWeights) -> tuple[OutcomeModelName, str | None]:
    """evalprism's outcome model of the checkpoint and lmarena's ``loss_type`` (None without a
    training config); see the module docstring."""
    loss_type = None
    if (directory / TRAINING_CONFIG_FILE).is_file():
        training = _read_json(directory, TRAINING_CONFIG_FILE)
        loss_type = training.get("loss_type") if isinstance(training, dict) else None
    if loss_type is None:
        if head.eta is None:
            return ETA_FREE_DEFAULT, None
        raise invalid_checkpoint(
            directory,
            f"cannot infer the head type: the head has an eta head (an rk or grk "
            f"model) and there is no {TRAINING_CONFIG_FILE} with the 'loss_type' "
            f'it was trained with; write one, e.g. {{"loss_type": "grk"}}',
        )
    outcome_model = LOSS_TYPES.get(str(loss_type))
    if outcome_model is None:
        raise invalid_checkpoint(
            directory,
            f"cannot infer the head type: {TRAINING_CONFIG_FILE} names loss_type "
            f"{loss_type!r}, which has no evalprism outcome model (expected one of "
            f"{', '.join(LOSS_TYPES)})",
        )
    if outcome_model in ETA_TO_RAW and head.eta is None:
        raise invalid_checkpoint(
            directory,
            f"cannot infer the head type: {TRAINING_CONFIG_FILE} names loss_type "
            f"{loss_type!r} but the head has no eta head 'head.eta_head'",
        )
    return outcome_model, str(loss_type)


def _load_tokenizer(directory: Path, vocab: int | None) -> Any:
    """The checkpoint's tokenizer (``tokenizer.json`` read as it was saved), with its CLS token and
    chat template checked; left truncation, right padding (as lmarena's endpoint)."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    try:
        if (directory / "tokenizer.json").is_file():
            tokenizer = PreTrainedTokenizerFast.from_pretrained(str(directory), local_files_only=True)
        else:
            tokenizer = AutoTokenizer.from_pretrained(str(directory), local_files_only=True)
    except Exception as exc:
        raise invalid_checkpoint(directory, f"the tokenizer cannot be loaded ({type(exc).__name__}: {exc})") from None
    if tokenizer.cls_token is None or tokenizer.cls_token_id is None:
        raise invalid_checkpoint(
            directory,
            "the tokenizer has no CLS token (lmarena's training adds one, e.g. "
            "'<|cls|>', whose hidden state feeds the head)",
        )
    if vocab is not None and tokenizer.cls_token_id >= vocab:
        raise invalid_checkpoint(
            directory,
            f"the tokenizer's CLS token has id {tokenizer.cls_token_id}, beyond the base model's {vocab} embeddings",
        )
    if not tokenizer.chat_template:
        raise invalid_checkpoint(
            directory,
            "the tokenizer has no chat template (lmarena formats every prompt with one before appending the CLS token)",
        )
    tokenizer.truncation_side = "left"
    tokenizer.padding_side = "right"
    return tokenizer


# ---------------------------------------------------------------------------------------------
# the backbone
# ---------------------------------------------------------------------------------------------


class LmarenaBackbone(Backbone):
    """The released base model: prompt -> chat template + CLS -> hidden state at the CLS position.

    Prompts are tokenized at once, sorted by length and run in batches of at most ``batch_size``
    prompts and ``batch_tokens`` padded tokens (right padding: with causal attention the CLS
    state does not see the padding)."""

    runtime = "torch"

    def __init__(
        self,
        directory: Path,
        tokenizer: Any,
        model: Any,
        *,
        max_length: int = DEFAULT_MAX_LENGTH,
        batch_size: int = 16,
        batch_tokens: int = 16384,
        progress: bool = False,
    ) -> None:
        super().__init__()
        self.spec = str(directory)
        self.trainable = False
        self.tokenizer = tokenizer
        self.model = model
        self.dim = int(model.config.hidden_size)
        self.max_length = max_length
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        self.progress = progress
        self.cls = str(tokenizer.cls_token)
        self.cls_id = int(tokenizer.cls_token_id)
        self.pad_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.cls_id)

    def format(self, prompts: Sequence[str]) -> list[str]:
        """Each prompt as lmarena's model reads it: each user turn its own user message in the chat
        template, inner CLS tokens replaced, the CLS token appended."""
        conversations = [[{"role": "user", "content": turn} for turn in prompt_turns(p)] for p in prompts]
        texts = self.tokenizer.apply_chat_template(conversations, tokenize=False, add_generation_prompt=False)
        return [t.replace(self.cls, CLS_STAND_IN) + self.cls for t in texts]

    def token_ids(self, prompts: Sequence[str]) -> list[list[int]]:
        """Token ids of the formatted prompts, truncated from the left to ``max_length``."""
        encoded = self.tokenizer(
            self.format(prompts), add_special_tokens=False, truncation=True, max_length=self.max_length
        )
        return [list(ids) for ids in encoded["input_ids"]]

    def _batches(self, lengths: np.ndarray) -> list[np.ndarray]:
        """Indices of prompts sorted by length, cut into batches within both limits."""
        order = np.argsort(lengths, kind="stable")
        batches, start = [], 0
        while start < order.size:
            stop = start + 1
            while (
                stop < order.size
                and stop - start < self.batch_size
                and (stop - start + 1) * lengths[order[stop]] <= self.batch_tokens
            ):
                stop += 1
            batches.append(order[start:stop])
            start = stop
        return batches

    def _cls_states(self, ids: list[list[int]]) -> torch.Tensor:
        """Hidden states (n, dim) at the last token (the CLS token) of each id list, one forward pass."""
        width = max(len(x) for x in ids)
        input_ids = torch.full((len(ids), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(ids), width), dtype=torch.long)
        for row, x in enumerate(ids):
            input_ids[row, : len(x)] = torch.tensor(x, dtype=torch.long)
            mask[row, : len(x)] = 1
        hidden = self.model(input_ids=input_ids, attention_mask=mask).last_hidden_state
        last = torch.tensor([len(x) - 1 for x in ids])
        return hidden[torch.arange(len(ids)), last].float()

    def features(self, prompts: Sequence[str]) -> torch.Tensor:
        keys = [prompt_turns(p) for p in prompts]  # two prompts of the same text but other turns differ
        first = dict(zip(keys, prompts, strict=True))
        distinct = [first[k] for k in dict.fromkeys(keys)]
        out = torch.zeros((len(distinct), self.dim))
        if distinct:
            ids = self.token_ids(distinct)
            self.model.eval()
            with torch.no_grad(), progress_bar("encoding (lmarena P2L)", len(distinct), self.progress) as bar:
                for batch in self._batches(np.array([len(x) for x in ids])):
                    out[torch.from_numpy(batch)] = self._cls_states([ids[i] for i in batch])
                    bar.update(len(batch))
        row = {k: i for i, k in enumerate(dict.fromkeys(keys))}
        return out[[row[k] for k in keys]]

    def save_weights(self, directory: Path) -> str:
        raise EvalprismError(f"{self.spec}: a released lmarena checkpoint is used in place; it is not re-saved")


# ---------------------------------------------------------------------------------------------
# loading
# ---------------------------------------------------------------------------------------------


def load_lmarena(
    directory: str | Path,
    *,
    precision: str = "float32",
    runtime: str = "torch",
    progress: bool = False,
    max_length: int = DEFAULT_MAX_LENGTH,
    batch_size: int = 16,
) -> tuple[LmarenaBackbone, LmarenaHead, list[str], dict[str, Any]]:
    """The backbone, head, model list and config of the lmarena checkpoint in ``directory``, for
    :meth:`P2LModel.load <evalprism.p2l.model.P2LModel.load>`; every file is checked before the
    base model's weights load. ``precision``: the base model's dtype (the head stays float32);
    ``runtime``: ``torch`` or ``auto`` (a causal LM runs in torch)."""
    directory = Path(directory)
    dtype = inference_dtype(precision)
    resolve_runtime(runtime, f"hf:{directory}")
    if max_length < 2:
        raise EvalprismError(
            f"max_length {max_length}: expected at least 2 tokens (the prompt and the CLS token)",
            parameter="max_length",
        )
    models = read_model_list(directory)
    base_config = _base_config(directory)
    hidden, vocab = base_config["hidden_size"], base_config.get("vocab_size")
    weights = _read_head(directory, hidden, models)
    outcome_model, loss_type = _infer_outcome_model(directory, weights)
    tokenizer = _load_tokenizer(directory, vocab if isinstance(vocab, int) else None)
    base = _load_base(directory, dtype, progress)
    head = LmarenaHead(
        _sequential(weights.coef), _sequential(weights.eta) if weights.eta else None, len(models), outcome_model
    )
    backbone = LmarenaBackbone(
        directory, tokenizer, base, max_length=max_length, batch_size=batch_size, progress=progress
    )
    released = {
        "model_type": base_config.get("model_type"),
        "loss_type": loss_type,
        "head": weights.shape,
        "cls_token": backbone.cls,
        "max_length": max_length,
    }
    config = {
        "outcome_model": outcome_model,
        "models": models,
        "backbone": {"spec": str(directory), "dim": hidden, "finetuned": False},
        "format": "lmarena",
        "lmarena": released,
    }
    return backbone, head, models, config


def _load_base(directory: Path, dtype: torch.dtype, progress: bool) -> Any:
    """The base model (``model.*`` weights; the head's are left out) in ``dtype``, every weight
    present; transformers' loading bar only with ``progress``."""
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # the unused head.* tensors are expected, not news
    bar = hf_logging.is_progress_bar_enabled()
    if not progress:
        hf_logging.disable_progress_bar()
    try:
        model, loading = AutoModel.from_pretrained(
            str(directory), dtype=dtype, local_files_only=True, output_loading_info=True
        )
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        raise invalid_checkpoint(
            directory, f"the base model cannot be loaded ({type(exc).__name__}: {first})"
        ) from None
    finally:
        if bar:
            hf_logging.enable_progress_bar()
    missing = sorted(loading.get("missing_keys") or [])
    if missing:
        raise invalid_checkpoint(directory, f"the base model's weights lack {len(missing)} tensors (e.g. {missing[0]})")
    return model.eval()
