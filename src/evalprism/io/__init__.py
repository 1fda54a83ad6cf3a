"""Reading tables and validating them against the canonical schemas."""

from evalprism.io.outputs import atomic_output_dir
from evalprism.io.schema import Column, Schema
from evalprism.io.tables import read_table

__all__ = ["Column", "Schema", "atomic_output_dir", "read_table"]
