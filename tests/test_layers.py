"""The analyses are siblings: no analysis package imports another, and the layers below them (io,
embed, stats) import none of them. What two analyses share moves down (DESIGN.md).

Every module of the package is parsed and every import in it counted, wherever it stands: at the top,
inside a function (a run-time import is an import), and under ``if TYPE_CHECKING:`` (a type named
across siblings is a dependency between them too). ``importlib.import_module("evalprism.X...")`` with
a constant name counts as well. Allowed above the analyses: ``serve`` (the router service around a
trained P2L model) imports ``p2l``; ``demo`` and the command line import every analysis.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import evalprism

PACKAGE = Path(evalprism.__file__).parent
ANALYSES = ("ecdf", "p2l", "stem", "judges", "compare")
#: packages below the analyses: none of them imports one
FOUNDATIONS = ("io", "embed", "stats")
#: what each package above the foundations may import of the analyses besides itself
ALLOWED = {**{a: frozenset({a}) for a in ANALYSES}, "serve": frozenset({"p2l"})}


def imported_packages(source: str) -> list[tuple[int, str]]:
    """(line, top-level evalprism package) of every import in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
            if node.module == "evalprism":  # from evalprism import p2l
                names = [f"evalprism.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module":
            arg = node.args[0] if node.args else None
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                names = [arg.value]
        line = getattr(node, "lineno", 0)
        found += [(line, n.split(".")[1]) for n in names if n.startswith("evalprism.")]
    return found


def wrong_imports(package: str, allowed: frozenset[str]) -> list[str]:
    """The imports of an analysis package (outside ``allowed``) in the modules of ``package``."""
    wrong = []
    for path in sorted((PACKAGE / package).rglob("*.py")):
        for line, target in imported_packages(path.read_text(encoding="utf-8")):
            if target in ANALYSES and target not in allowed:
                wrong.append(f"{path.relative_to(PACKAGE)}:{line} imports evalprism.{target}")
    return wrong


def test_the_parser_finds_every_kind_of_import() -> None:
    """The checker itself, on a module holding each kind: a top import, a function's import, a type
    import, a package-relative name and import_module; a relative import stays in its package."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "from evalprism.p2l.model import P2LModel\n"
        "import evalprism.stem.pool\n"
        "from evalprism import judges\n"
        "if TYPE_CHECKING:\n"
        "    from evalprism.compare.result import CompareResult\n"
        "def f():\n"
        "    from evalprism.ecdf import analyze\n"
        "    importlib.import_module('evalprism.io.items')\n"
        "from . import sibling\n"
    )
    assert [t for _, t in imported_packages(source)] == ["p2l", "stem", "judges", "compare", "ecdf", "io"]


@pytest.mark.parametrize("analysis", ANALYSES)
def test_no_analysis_imports_another(analysis: str) -> None:
    assert wrong_imports(analysis, ALLOWED[analysis]) == []


@pytest.mark.parametrize("package", FOUNDATIONS)
def test_the_layers_below_import_no_analysis(package: str) -> None:
    assert wrong_imports(package, frozenset()) == []


def test_the_shared_modules_import_no_analysis() -> None:
    """The package's own modules (errors, vocabularies, progress, ...) serve every layer; only the
    command line (``cli.py``, ``__main__.py``) imports the analyses."""
    wrong = [
        f"{path.name}:{line} imports evalprism.{target}"
        for path in sorted(PACKAGE.glob("*.py"))
        if path.name not in ("cli.py", "__main__.py")
        for line, target in imported_packages(path.read_text(encoding="utf-8"))
        if target in ANALYSES
    ]
    assert wrong == []


def test_only_serve_demo_and_the_cli_sit_above_the_analyses() -> None:
    """Every other package of evalprism is an analysis or a foundation (or the service's, the demo's,
    the report's own); a new package is placed in one of these lists deliberately."""
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert packages == {*ANALYSES, *FOUNDATIONS, "serve", "demo", "report"}
    assert wrong_imports("serve", ALLOWED["serve"]) == []
    assert wrong_imports("report", frozenset()) == []
