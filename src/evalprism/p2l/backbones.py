"""Backbones of a P2L model: map prompts to a feature vector that the coefficient head reads.

Spec strings (parsed by :func:`evalprism.embed.spec.parse_spec`, as the embedders' are; the
sentence encoders come from the embedders' factory :func:`evalprism.embed.get_embedder`):

- ``minilm`` (default) or ``st:<name or path>``: a sentence-transformers encoder. Frozen, its
  prompt embeddings come from the persistent embedding cache, so a second training run or a
  leaderboard over already seen prompts encodes nothing. With ``finetune`` the encoder is trained
  too (mean pooling as the model defines it).
- ``hf:<path>``: any local Hugging Face causal LM (Qwen2.5, Llama, ...) without its LM head; the
  prompt's feature is the hidden state of its last token, as in the paper (section 3.1).
- ``static`` or ``static:<path>``: a static embedding model distilled (once, into the cache) from the
  packaged MiniLM or a local encoder (:mod:`evalprism.embed.static`): the mean of the prompt's token
  vectors, no transformer at inference (~0.3 ms per prompt). Frozen; the service's fast backbone.

Nothing is downloaded: a spec that is not a local path or a model already in the local cache is
an error that says so. ``instructor:`` is refused: INSTRUCTOR encodes with an instruction, which a
P2L backbone does not have. Building a backbone writes nothing: the dimension is read from the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from evalprism.embed import get_embedder
from evalprism.embed.backends import quiet_transformers, resolve_backend, sentence_dimension
from evalprism.embed.clip import clip_for_tokenizer
from evalprism.embed.embedder import check_finite
from evalprism.embed.openvino_runtime import OpenVINOEncoder
from evalprism.embed.runtime import choose_runtime
from evalprism.embed.spec import BACKBONE_KINDS, EncoderSpec, Kind, parse_spec
from evalprism.embed.static import StaticEncoder, ensure_static_model
from evalprism.errors import EvalprismError
from evalprism.io.embed_options import EngineOptions
from evalprism.io.options import check_choice
from evalprism.progress import progress_bar, status
from evalprism.vocabularies import ComputePrecision, Runtime, choices

#: the backbone kinds that are sentence encoders (built by the embedders' factory)
ENCODER_KINDS: tuple[Kind, ...] = ("minilm", "st")


class Backbone(nn.Module):
    """Prompts -> features (n, ``dim``). ``trainable`` backbones return tensors that carry gradients."""

    spec: str
    dim: int
    trainable: bool
    max_length: int  # the longest prompt, in tokens, the backbone reads (longer ones are cut)
    runtime: str = "torch"  # what computes the features: torch or openvino
    #: features in well under a millisecond per prompt (no transformer): the router service runs its
    #: batches in the event loop's thread instead of handing each to a worker thread
    fast: bool = False

    def features(self, prompts: Sequence[str]) -> torch.Tensor:  # pragma: no cover - interface
        raise NotImplementedError

    def save_weights(self, directory: Path) -> str:
        """Write trained weights under ``directory``; return the spec that reloads them (relative)."""
        raise NotImplementedError  # pragma: no cover - interface

    def configure_training(self, *, max_length: int | None = None, gradient_checkpointing: bool = False) -> None:
        """Fine-tuning options: the longest prompt read, in tokens (saved with the fine-tuned weights,
        so inference reads prompts as training did), and gradient checkpointing (recompute the
        activations in the backward pass: less memory for large backbones, about a third more time).
        A frozen backbone has neither (:meth:`TrainOptions.resolved <evalprism.p2l.TrainOptions.resolved>`
        tells the user)."""
        if max_length is not None or gradient_checkpointing:
            raise ValueError(f"backbone '{self.spec}' is frozen: nothing to configure for training")

    def limit_prompt_tokens(self, tokens: int) -> None:
        """Read at most ``tokens`` tokens of each prompt from now on (never more than the backbone
        already reads): the serving-side cap that bounds one long prompt's cost. Truncation changes the
        coefficients of the prompts it cuts; ``benchmarks/bench_serve.py`` measures by how much."""
        if tokens < 1:
            raise EvalprismError(f"max_prompt_tokens {tokens}: expected a positive number of tokens")
        self._cap_tokens(int(tokens))

    def _cap_tokens(self, tokens: int) -> None:
        self.max_length = min(int(self.max_length), tokens)
        getattr(self, "_frozen_cache", {}).clear()  # features of the uncut prompts


def _on_device(batch: Any, device: torch.device) -> Any:
    """A tokenizer's output (a mapping of tensors) on ``device``, where the backbone's weights are."""
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def _checkpoint_activations(model: nn.Module) -> None:
    """Gradient checkpointing in every Hugging Face model inside ``model`` (a causal LM, or the
    transformer of a sentence encoder), without the reentrant autograd function: that one fails under
    DDP and with inputs that need no gradient (the token ids)."""
    from transformers import PreTrainedModel

    for module in model.modules():
        if isinstance(module, PreTrainedModel):
            enable = getattr(module, "activation_checkpointing_enable", None)  # transformers >= 5.2x
            if enable is not None:
                enable({"use_reentrant": False})
            else:
                module.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})


class SentenceEncoderBackbone(Backbone):
    """A sentence-transformers encoder; frozen (cached embeddings) unless ``finetune``.

    ``precision="bfloat16"`` runs a private bfloat16 copy of the encoder for inference (about
    2.4x faster on CPUs with native bf16, coefficients within ~1e-2 of float32); its features
    bypass the embedding cache, which holds float32 embeddings only. ``runtime="openvino"``
    runs the frozen encoder in OpenVINO (:mod:`evalprism.embed.openvino_runtime`) at either
    precision, also without the cache: what a serving process wants, where every prompt is new."""

    def __init__(
        self,
        spec: str | EncoderSpec,
        *,
        finetune: bool = False,
        cache_dir: str | Path | bool | None = None,
        progress: bool = True,
        precision: str = "float32",
        runtime: str = "torch",
        engine: EngineOptions | None = None,
    ) -> None:
        super().__init__()
        spec = parse_spec(spec, role="backbone", kinds=ENCODER_KINDS)
        self.spec = spec.text
        self.trainable = finetune
        self.progress = progress
        self.encoder: Any = None
        self.compiled: OpenVINOEncoder | None = None
        if finetune and runtime != "torch":
            raise EvalprismError(f"runtime '{runtime}' is for inference; a fine-tuned backbone trains in torch")
        if finetune or precision != "float32" or runtime != "torch":
            self.encoder = self._private_encoder()
            if runtime == "openvino":  # traced from the float32 weights; OpenVINO computes in `precision`
                self.compiled = OpenVINOEncoder(self.encoder, precision=precision)
                self.runtime = "openvino"
            else:
                self.encoder.to(inference_dtype(precision))
            dim = sentence_dimension(self.encoder)
            if dim is None:
                raise EvalprismError(f"backbone {self.spec}: the encoder declares no sentence embedding dimension")
            self.dim = dim
        else:
            self.embedder = get_embedder(
                spec, cache_dir=cache_dir, progress=progress, role="backbone", kinds=ENCODER_KINDS, engine=engine
            )
            self.dim = self.embedder.dim  # from the model: nothing is encoded into the user's cache

    def _private_encoder(self) -> Any:
        """A private copy of the encoder: the embedder's process-wide model must keep its pretrained
        weights and its own prompt length (its cache is keyed by the model, not by a cap)."""
        from sentence_transformers import SentenceTransformer

        quiet_transformers()
        location = resolve_backend(parse_spec(self.spec, role="backbone", kinds=ENCODER_KINDS)).location
        try:
            return SentenceTransformer(location, device="cpu")
        except Exception as exc:
            raise EvalprismError(
                f"backbone '{self.spec}': cannot load '{location}' ({type(exc).__name__}: {exc})"
            ) from None

    def _cap_tokens(self, tokens: int) -> None:
        if self.encoder is None:
            self.encoder = self._private_encoder()
        # OpenVINO tokenises with this encoder's own preprocess: the cap holds there too
        self.encoder.max_seq_length = min(int(self.encoder.max_seq_length), tokens)

    def features(self, prompts: Sequence[str]) -> torch.Tensor:
        if self.encoder is None:
            return torch.from_numpy(self.embedder.embed(list(prompts)))  # the embedder cuts over-long prompts
        prompts, _ = clip_for_tokenizer(list(prompts), self.encoder.tokenizer, int(self.encoder.max_seq_length))
        if self.compiled is not None:
            out = torch.from_numpy(self.compiled.encode(prompts))
        else:
            prepare = (
                getattr(self.encoder, "preprocess", None) or self.encoder.tokenize
            )  # renamed in sentence-transformers 6
            out = self.encoder(_on_device(prepare(list(prompts)), self.encoder.device))["sentence_embedding"]
        return nn.functional.normalize(out.float(), dim=-1)

    def save_weights(self, directory: Path) -> str:
        if not self.trainable:
            return self.spec
        self.encoder.save(str(directory / "backbone"))
        return "st:backbone"

    def configure_training(self, *, max_length: int | None = None, gradient_checkpointing: bool = False) -> None:
        if self.encoder is None or not self.trainable:
            super().configure_training(max_length=max_length, gradient_checkpointing=gradient_checkpointing)
            return
        if max_length is not None:  # saved in the encoder's sentence_bert_config.json
            self.encoder.max_seq_length = max_length
        if gradient_checkpointing:
            _checkpoint_activations(self.encoder)


class StaticBackbone(Backbone):
    """A static embedding model (:mod:`evalprism.embed.static`), built into the cache on first use.
    Frozen; computed in numpy (``runtime`` ``numpy``), so precision and runtime options do not apply."""

    runtime = "numpy"
    fast = True

    def __init__(
        self,
        spec: str | EncoderSpec,
        *,
        finetune: bool = False,
        cache_dir: str | Path | bool | None = None,
        progress: bool = True,
    ) -> None:
        super().__init__()
        spec = parse_spec(spec, role="backbone", kinds=("static",))
        if finetune:
            raise EvalprismError(
                f"backbone '{spec}' is a static model: it cannot be fine-tuned (drop finetune, or fine-tune minilm)",
                parameter="finetune",
            )
        self.spec = spec.text
        self.trainable = False
        directory = ensure_static_model(
            spec, cache_dir=cache_dir if isinstance(cache_dir, (str, Path)) else None, progress=progress
        )
        self.encoder = StaticEncoder(directory)
        self.dim = self.encoder.dim
        self.max_length = self.encoder.max_tokens

    def _cap_tokens(self, tokens: int) -> None:
        self.encoder.max_tokens = self.max_length = min(self.encoder.max_tokens, tokens)

    def features(self, prompts: Sequence[str]) -> torch.Tensor:
        prompts = list(prompts)
        vectors = self.encoder.encode(prompts)
        check_finite(vectors, prompts, self.spec)
        return torch.from_numpy(vectors)

    def save_weights(self, directory: Path) -> str:
        return self.spec  # rebuilt from its source (the same distillation) where the model is loaded


#: the model-config attribute that carries a fine-tuned causal LM's max_length into its saved config.json
MAX_LENGTH_ATTR = "evalprism_max_length"
#: the longest prompt a causal-LM backbone reads unless fine-tuning set another (tokens)
DEFAULT_MAX_LENGTH = 1024


class CausalLMBackbone(Backbone):
    """A local Hugging Face causal LM without its LM head; feature = last non-padding token's state.
    Prompts are cut after ``max_length`` tokens (1024, or what fine-tuning set)."""

    def __init__(
        self,
        spec: str | EncoderSpec,
        *,
        finetune: bool = False,
        progress: bool = True,
        batch_size: int = 8,
        root: Path | None = None,
    ) -> None:
        super().__init__()
        from transformers import AutoModel, AutoTokenizer

        quiet_transformers()
        spec = parse_spec(spec, role="backbone", kinds=("hf",))
        path = Path(spec.location).expanduser()
        if root is not None and not path.is_absolute():
            path = root / path
        if not path.is_dir():
            raise EvalprismError(
                f"backbone '{spec}': '{path}' is not a local model directory "
                "(nothing is downloaded: give the directory of a saved Hugging Face model)"
            )
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(path)
            self.model = AutoModel.from_pretrained(path, dtype=torch.float32)
        except Exception as exc:
            raise EvalprismError(f"backbone '{spec}': cannot load '{path}' ({type(exc).__name__}: {exc})") from None
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.spec = spec.text
        self.trainable = finetune
        self.progress = progress
        self.batch_size = batch_size
        self.dim = int(self.model.config.hidden_size)
        self.max_length = int(getattr(self.model.config, MAX_LENGTH_ATTR, None) or DEFAULT_MAX_LENGTH)
        self.model.requires_grad_(finetune)
        self._frozen_cache: dict[str, np.ndarray] = {}

    def _encode(self, prompts: list[str]) -> torch.Tensor:
        prompts, _ = clip_for_tokenizer(prompts, self.tokenizer, self.max_length)  # same tokens, no 50 MB tokenizing
        batch = self.tokenizer(prompts, return_tensors="pt", padding=True, truncation=True, max_length=self.max_length)
        batch = _on_device(batch, self.model.device)
        hidden = self.model(**batch).last_hidden_state
        mask = batch["attention_mask"]
        # index of the last real token, whichever side the tokenizer pads on
        last = mask.shape[1] - 1 - mask.flip(1).argmax(dim=1)
        return hidden[torch.arange(hidden.shape[0]), last].float()

    def features(self, prompts: Sequence[str]) -> torch.Tensor:
        prompts = list(prompts)
        if self.trainable:
            return self._encode(prompts)
        todo = list(dict.fromkeys(p for p in prompts if p not in self._frozen_cache))
        if todo:
            self.model.eval()
            with torch.no_grad(), progress_bar(f"encoding ({self.spec})", len(todo), self.progress) as bar:
                for start in range(0, len(todo), self.batch_size):
                    chunk = todo[start : start + self.batch_size]
                    vectors = self._encode(chunk).cpu().numpy()
                    check_finite(vectors, chunk, self.spec)  # a NaN feature would train or score nothing
                    self._frozen_cache.update(zip(chunk, vectors, strict=True))
                    bar.update(len(chunk))
        return torch.from_numpy(np.stack([self._frozen_cache[p] for p in prompts]))

    def save_weights(self, directory: Path) -> str:
        if not self.trainable:
            return self.spec
        self.model.save_pretrained(directory / "backbone")
        self.tokenizer.save_pretrained(directory / "backbone")
        return "hf:backbone"

    def configure_training(self, *, max_length: int | None = None, gradient_checkpointing: bool = False) -> None:
        if not self.trainable:
            super().configure_training(max_length=max_length, gradient_checkpointing=gradient_checkpointing)
            return
        if max_length is not None:
            self.max_length = max_length
            setattr(self.model.config, MAX_LENGTH_ATTR, max_length)  # saved in backbone/config.json
        if gradient_checkpointing:
            _checkpoint_activations(self.model)


#: the runtimes a backbone runs in (:data:`~evalprism.vocabularies.Runtime` once auto is decided)
RUNTIMES = tuple(r for r in choices(Runtime) if r != "auto")


def inference_dtype(precision: str) -> torch.dtype:
    """The torch dtype of a precision name (:data:`~evalprism.vocabularies.ComputePrecision`)."""
    return getattr(torch, check_choice("precision", precision, ComputePrecision))


def native_bf16() -> bool:
    """Whether this CPU computes bfloat16 natively (AVX512-BF16 or AMX); elsewhere bfloat16 is
    emulated and slower than float32. Linux reads /proc/cpuinfo; other systems answer False."""
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    return " avx512_bf16" in flags or " amx_bf16" in flags


def resolve_runtime(runtime: str, spec: str) -> str:
    """``torch`` or ``openvino`` for a backbone ``spec``, by the analyses' rule
    (:func:`evalprism.embed.runtime.choose_runtime`: OpenVINO for sentence encoders where it is installed;
    sentence-encoder backbones run on the CPU); causal LMs (``hf:``) always run in torch, and static
    models in numpy whatever is asked (nothing to compile)."""
    check_choice("runtime", runtime, Runtime)
    parsed = parse_spec(spec, role="backbone", kinds=BACKBONE_KINDS)
    if parsed.kind == "static":
        return "torch"  # unused: a static backbone computes in numpy
    return choose_runtime(runtime, parsed, device="cpu", name="runtime", role="backbone", on_command_line=False)


def load_backbone(
    spec: str,
    *,
    finetune: bool = False,
    cache_dir: str | Path | bool | None = None,
    progress: bool = True,
    root: Path | None = None,
    precision: str = "float32",
    runtime: str = "torch",
    engine: EngineOptions | None = None,
) -> Backbone:
    """The backbone named by ``spec``; relative ``st:``/``hf:`` paths resolve against ``root``
    (a model directory holding fine-tuned weights). ``precision``: the backbone's inference dtype;
    ``runtime``: what runs it (:func:`resolve_runtime`); ``engine``: where a frozen sentence encoder
    encodes the prompts missing from the cache (``ray``: a Ray Data actor pool)."""
    inference_dtype(precision)
    requested, runtime = runtime, resolve_runtime(runtime, spec)
    parsed = parse_spec(spec, role="backbone", kinds=BACKBONE_KINDS)
    if engine is not None and engine.engine == "ray" and (not parsed.sentence_encoder or finetune):
        raise EvalprismError(
            f"engine 'ray' pre-encodes prompts with a frozen sentence-encoder backbone (minilm, st:...); "
            f"backbone '{spec}'{' fine-tuned' if finetune else ''} encodes in this process: drop engine",
            parameter="engine",
        )
    if parsed.kind == "static":
        return StaticBackbone(parsed, finetune=finetune, cache_dir=cache_dir, progress=progress)
    if parsed.kind == "hf":
        backbone = CausalLMBackbone(parsed, finetune=finetune, progress=progress, root=root)
        backbone.model.to(inference_dtype(precision))
        return backbone
    parsed = _saved_encoder(parsed, root)
    try:
        return SentenceEncoderBackbone(
            parsed,
            finetune=finetune,
            cache_dir=cache_dir,
            progress=progress,
            precision=precision,
            runtime=runtime,
            engine=engine,
        )
    except EvalprismError as exc:
        if requested != "auto" or runtime == "torch":
            raise
        status(f"{exc}; running it in torch instead")
        return SentenceEncoderBackbone(
            parsed, finetune=finetune, cache_dir=cache_dir, progress=progress, precision=precision, runtime="torch"
        )


def _saved_encoder(spec: EncoderSpec, root: Path | None) -> EncoderSpec:
    """An ``st:`` location relative to ``root`` (a model directory's fine-tuned encoder, saved as
    ``st:backbone``) made absolute when it exists there; any other spec unchanged."""
    if spec.kind != "st" or root is None or Path(spec.location).is_absolute() or not (root / spec.location).exists():
        return spec
    return parse_spec(f"st:{(root / spec.location).resolve()}", role="backbone", kinds=BACKBONE_KINDS)


def describe(backbone: Backbone) -> dict[str, Any]:
    return {"spec": backbone.spec, "dim": backbone.dim, "finetuned": backbone.trainable}
