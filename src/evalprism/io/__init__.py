"""Reading users' files into the canonical tables, and writing outputs safely.

Every reader validates against one schema (:mod:`evalprism.io.schema`) and reports bad input as one
:class:`~evalprism.errors.EvalprismError` naming the file, row or column. Item-level results (score
tables, harness logs, responses files) have one reader, :mod:`evalprism.io.items` (its formats: one
registry, :mod:`evalprism.io.item_formats`), which returns them with their typed provenance. Outputs
go through :mod:`evalprism.io.outputs` (claimed before work, written atomically, never over a user's
files).

The names load from their submodules on first use (:mod:`evalprism._lazy`), as in every package.
"""

from typing import TYPE_CHECKING

from evalprism._lazy import lazy_package

if TYPE_CHECKING:  # static tools and IDEs see the names; at run time they load on first access
    from evalprism.io.battles import BATTLES_SCHEMA, read_battles, to_canonical_battles
    from evalprism.io.correctness import encode_correctness, read_models
    from evalprism.io.costs import Costs, read_costs
    from evalprism.io.items import Correctness, Items, read_correctness, read_items
    from evalprism.io.judgments import read_judgments_input, read_trec_judgments
    from evalprism.io.outputs import (
        OutputKind,
        OutputTarget,
        atomic_output_dir,
        claim_output,
        save_result,
        written_files,
    )
    from evalprism.io.prompts import read_prompts
    from evalprism.io.responses import RESPONSES_SCHEMA
    from evalprism.io.schema import Column, Schema
    from evalprism.io.tables import read_table
    from evalprism.io.trec_files import named_qrels

__all__ = [
    "BATTLES_SCHEMA",
    "RESPONSES_SCHEMA",
    "Column",
    "Correctness",
    "Costs",
    "Items",
    "OutputKind",
    "OutputTarget",
    "Schema",
    "atomic_output_dir",
    "claim_output",
    "encode_correctness",
    "named_qrels",
    "read_battles",
    "read_correctness",
    "read_costs",
    "read_items",
    "read_judgments_input",
    "read_models",
    "read_prompts",
    "read_table",
    "read_trec_judgments",
    "save_result",
    "to_canonical_battles",
    "written_files",
]

lazy_package(
    __name__,
    {
        "battles": ["BATTLES_SCHEMA", "read_battles", "to_canonical_battles"],
        "correctness": ["encode_correctness", "read_models"],
        "costs": ["Costs", "read_costs"],
        "items": ["Correctness", "Items", "read_correctness", "read_items"],
        "judgments": ["read_judgments_input", "read_trec_judgments"],
        "outputs": ["OutputKind", "OutputTarget", "atomic_output_dir", "claim_output", "save_result", "written_files"],
        "prompts": ["read_prompts"],
        "responses": ["RESPONSES_SCHEMA"],
        "schema": ["Column", "Schema"],
        "tables": ["read_table"],
        "trec_files": ["named_qrels"],
    },
)
