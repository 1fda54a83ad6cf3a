"""Shared builders of test inputs (imported as ``from builders import ...``): inputs several test modules
build the same way, written once so that each test says only what differs in its own."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

Config = TypeVar("Config")

TINY_TRANSFORMER: dict[str, int] = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
}
"""The size of every transformer the tests build: 2 layers of width 32, 4 attention heads, a
feed-forward of 64."""


def tiny_transformer_config(kind: type[Config], vocab_size: int, max_positions: int, **extra: Any) -> Config:
    """A ``kind`` (a transformers config class: BertConfig, Qwen2Config, LlamaConfig) of the
    :data:`TINY_TRANSFORMER` size, for ``vocab_size`` tokens and ``max_positions`` positions: a randomly
    initialised model of it downloads nothing and runs on a CPU in milliseconds. ``extra`` adds what the
    architecture or the test needs (``num_key_value_heads`` for grouped attention, special token ids)."""
    return kind(vocab_size=vocab_size, max_position_embeddings=max_positions, **TINY_TRANSFORMER, **extra)


def tiny_bert(directory: Path, words: Sequence[str]) -> Path:
    """A randomly initialised 2-layer BERT (seed 0) with a WordPiece tokenizer over ``words`` (lowercase
    words and punctuation; anything else is [UNK]), saved in ``directory``: what a static model is distilled
    from in well under a second."""
    import torch
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
    )
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words, "##s", "##ing"]
    tok = Tokenizer(models.WordPiece({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    tok.decoder = decoders.WordPiece()
    PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        mask_token="[MASK]",
    ).save_pretrained(directory)
    config = tiny_transformer_config(BertConfig, len(vocab), 64)
    torch.manual_seed(0)
    BertModel(config).save_pretrained(directory)
    return directory
