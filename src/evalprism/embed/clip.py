"""Cut a text that is far longer than an encoder reads before it is tokenized.

Encoders read at most ``max_tokens`` tokens and drop the rest, but their tokenizers tokenize the
whole text first: a 50 MB prompt costs minutes of tokenizing for a window of a few hundred tokens.
:func:`clip_text` keeps a prefix that still holds the whole window, so the tokens the encoder reads,
and therefore its vector, are the same as from the full text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

#: the first cut is this many characters per token of the window (a token is a few characters; the
#: cut grows when a text has fewer tokens than that, e.g. long runs of whitespace)
CHARS_PER_TOKEN = 32


def clip_text(text: str, count_tokens: Callable[[str], int], max_tokens: int) -> str:
    """A prefix of ``text`` whose first ``max_tokens`` tokens are those of ``text`` (``text`` itself
    when it is short). The cut is made before a whitespace character, where every common tokenizer
    (WordPiece, byte-level BPE, SentencePiece) starts a new token, and only when the prefix holds more
    tokens than the window, so the window never reaches the cut."""
    limit = max(int(max_tokens), 1) * CHARS_PER_TOKEN
    while len(text) > limit:
        head = text[:limit]
        space = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
        if space > limit // 2:
            head = head[:space]
        if count_tokens(head) > max_tokens + 2:  # special tokens around the window included
            return head
        limit *= 4
    return text


def clip_texts(texts: Sequence[str], count_tokens: Callable[[str], int], max_tokens: int) -> tuple[list[str], int]:
    """:func:`clip_text` of every text, and how many were cut."""
    out = [clip_text(t, count_tokens, max_tokens) for t in texts]
    return out, sum(a is not b for a, b in zip(out, texts, strict=True))


def clip_for_tokenizer(texts: Sequence[str], tokenizer: object, max_tokens: int) -> tuple[list[str], int]:
    """:func:`clip_texts` for a Hugging Face tokenizer that truncates on the right (its default). One that
    truncates on the left (lmarena's P2L reads the end of a prompt) keeps the end, so nothing is cut."""
    if getattr(tokenizer, "truncation_side", "right") != "right":
        return list(texts), 0
    return clip_texts(texts, token_counter(tokenizer), max_tokens)


def token_counter(tokenizer: object) -> Callable[[str], int]:
    """The number of tokens a Hugging Face tokenizer makes of a text (without special tokens)."""

    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])  # type: ignore[operator]

    return count
