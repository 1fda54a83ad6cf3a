"""``python -m evalprism``: the same entry point as the ``evalprism`` command."""

from evalprism.cli import main

main()
