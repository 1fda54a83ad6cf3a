"""The one exception type a user sees.

Every input problem the toolkit detects is raised as :class:`EvalprismError` with a
message that names the file, row or column and what was expected. The CLI prints the
message and exits with code 2; library users catch the exception.
"""


class EvalprismError(Exception):
    """A problem with the user's input or options, explained in one message."""

    exit_code = 2
