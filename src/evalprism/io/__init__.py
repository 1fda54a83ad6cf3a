"""Reading tables and validating them against the canonical schemas."""

from evalprism.io.battles import BATTLES_SCHEMA, read_battles, to_canonical_battles
from evalprism.io.outputs import atomic_output_dir
from evalprism.io.schema import Column, Schema
from evalprism.io.tables import read_table

__all__ = [
    "BATTLES_SCHEMA",
    "Column",
    "Schema",
    "atomic_output_dir",
    "read_battles",
    "read_table",
    "to_canonical_battles",
]
