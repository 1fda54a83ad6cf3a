"""The one exception type a user sees.

Every input problem the toolkit detects is raised as :class:`EvalprismError` with a
message that names the file, row or column and what was expected. The CLI prints the
message and exits with code 2; library users catch the exception.

A message about an option names the library parameter (``val_fraction``), which is what a notebook
user typed; the error records that name in ``parameter`` so that the CLI can show the flag the user
typed instead (``--val-fraction``, see ``evalprism.cli``) without the library knowing its flags.
"""

from __future__ import annotations

import re

#: a value quoted in a message: 'text' whose quotes are not apostrophes inside words (model's)
_QUOTED_VALUE = re.compile(r"((?<!\w)'[^'\n]*'(?!\w))")


class EvalprismError(Exception):
    """A problem with the user's input or options, explained in one message.

    ``parameter``: the library parameter the message is about (its name appears in the message as a
    word), or None.
    """

    exit_code = 2

    def __init__(self, message: str, *, parameter: str | None = None) -> None:
        super().__init__(cut_long_values(message))
        self.parameter = parameter

    def naming(self, spelling: str) -> str:
        """The message with every mention of the parameter spelled ``spelling`` (e.g. a command-line flag)."""
        message = str(self)
        if not self.parameter:
            return message
        # a whole word, and not part of a path, a file name or a quoted value the user gave
        # ('/runs/model/x.csv', 'model.csv', "column 'model'") which must stay as the user wrote it
        word = rf"(?<![\w\-/\\.'\"]){re.escape(self.parameter)}(?![\w\-/\\'\"]|\.\w)"
        # quoted values ('not a host!') are what the user typed: only the text between them is renamed
        parts = _QUOTED_VALUE.split(message)
        return "".join(part if i % 2 else re.sub(word, spelling, part) for i, part in enumerate(parts))


#: how many characters of a value a message shows
SHOWN_CHARACTERS = 200


def shorten(value: object, limit: int = SHOWN_CHARACTERS) -> str:
    """``value`` as text, cut to its first ``limit`` characters with the full length said when longer:
    a message echoes what the user gave (a cell, a name, a path) and one 50 MB cell must not make a
    50 MB error line. The one cut of every value a message quotes."""
    text = str(value)
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text):,} characters)"


#: the longest message kept whole; a longer one keeps its start and end
LONGEST_MESSAGE = 4_000

#: a quoted value ('...' or "...") or an unbroken run of characters longer than SHOWN_CHARACTERS
_N = SHOWN_CHARACTERS + 1
_LONG_VALUE = re.compile(rf"'[^'\n]{{{_N},}}'|\"[^\"\n]{{{_N},}}\"|\S{{{_N},}}")


def _cut(match: re.Match[str]) -> str:
    text = match[0]
    if text[0] in "'\"" and text[-1] == text[0] and len(text) > 1:
        return text[0] + shorten(text[1:-1]) + text[0]
    return shorten(text)


def cut_long_values(message: str) -> str:
    """``message`` with every value it echoes cut by :func:`shorten`: each quoted value ('...' or "...")
    and each unbroken run of characters longer than :data:`SHOWN_CHARACTERS`; a message still longer
    than :data:`LONGEST_MESSAGE` (a long value with spaces) keeps its start and its end, which says
    what was expected. Every :class:`EvalprismError` passes through it, so a 50 MB cell quoted by any
    check makes a line of a few hundred characters."""
    if len(message) <= SHOWN_CHARACTERS:
        return message
    message = _LONG_VALUE.sub(_cut, message)
    if len(message) > LONGEST_MESSAGE:
        head, tail = LONGEST_MESSAGE * 2 // 3, LONGEST_MESSAGE // 3
        message = f"{message[:head]} ... ({len(message) - head - tail:,} characters left out) ... {message[-tail:]}"
    return message
