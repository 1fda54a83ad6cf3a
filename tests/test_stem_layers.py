"""STEM runs one way: each module of ``evalprism.stem`` imports only modules listed before it in the
layers of the package docstring (the one list of them), at its top or inside a function.

An import under ``if TYPE_CHECKING:`` names a type for an annotation and runs nothing, so it is not
counted; ``importlib.import_module("evalprism.stem.X")`` and ``from evalprism.stem import NAME``
(a lazily exported name, resolved to its submodule) are.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from evalprism import stem

STEM = Path(stem.__file__).parent


def layers() -> list[str]:
    """The stem modules, lowest first, as the package docstring lists them (``- ``name``: ...``)."""
    section = (stem.__doc__ or "").split("Layers, lowest first", 1)
    assert len(section) == 2, "evalprism.stem's docstring lost its 'Layers, lowest first' list"
    return re.findall(r"^- ``(\w+)``", section[1], flags=re.MULTILINE)


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def stem_imports(source: str, exports: dict[str, str]) -> list[tuple[int, str]]:
    """(line, stem module) of every import of a stem module in ``source`` that runs, wherever it
    stands; ``exports``: the package's lazily exported names -> their submodule."""
    tree = ast.parse(source)
    type_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _type_checking(node.test):
            type_only.update(id(sub) for child in node.body for sub in ast.walk(child))
    found = []
    for node in ast.walk(tree):
        if id(node) in type_only:
            continue
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # a relative import inside the package
                module = "evalprism.stem" + (f".{module}" if module else "")
            if module == "evalprism.stem":
                found += [(node.lineno, exports.get(alias.name, alias.name)) for alias in node.names]
            elif module.startswith("evalprism.stem."):
                found.append((node.lineno, module.split(".")[2]))
        elif isinstance(node, ast.Import):
            found += [
                (node.lineno, alias.name.split(".")[2])
                for alias in node.names
                if alias.name.startswith("evalprism.stem.")
            ]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module":
            arg = node.args[0] if node.args else None
            if isinstance(arg, ast.Constant) and str(arg.value).startswith("evalprism.stem."):
                found.append((node.lineno, str(arg.value).split(".")[2]))
    return sorted(found)


def _exports() -> dict[str, str]:
    return dict(object.__getattribute__(stem, "_lazy_exports"))


def upward_imports() -> list[str]:
    order = layers()
    rank = {name: i for i, name in enumerate(order)}
    exports = _exports()
    wrong = []
    for name in order:
        for line, target in stem_imports((STEM / f"{name}.py").read_text(encoding="utf-8"), exports):
            if target not in rank:
                wrong.append(f"{name}.py:{line} imports stem.{target}, which is not in the layers")
            elif rank[target] >= rank[name]:
                wrong.append(f"{name}.py:{line} imports stem.{target}, listed {'at' if target == name else 'above'} it")
    return wrong


def test_every_stem_module_has_one_layer() -> None:
    order = layers()
    assert len(order) == len(set(order)), order
    on_disk = sorted(p.stem for p in STEM.glob("*.py") if p.stem != "__init__")
    assert sorted(order) == on_disk, "list every stem module once in evalprism.stem's docstring layers"
    assert set(_exports().values()) <= set(order)


def test_stem_modules_import_only_lower_layers() -> None:
    assert upward_imports() == []


def test_the_check_sees_imports_inside_functions_and_skips_type_only_ones() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from evalprism.stem.pool import Pool\n"
        "from evalprism.stem import locate_model\n"
        "if TYPE_CHECKING:\n"
        "    from evalprism.stem.evaluate import Trials\n"
        "def f():\n"
        "    from evalprism.stem.location_result import LocationResult\n"
        "    import evalprism.stem.report\n"
        "    return importlib.import_module('evalprism.stem.subset')\n"
    )
    found = stem_imports(source, {"locate_model": "locate_one"})
    assert found == [(2, "pool"), (3, "locate_one"), (7, "location_result"), (8, "report"), (9, "subset")]
