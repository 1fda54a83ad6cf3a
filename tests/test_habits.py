"""The code's habits, held by tests (issue 38, item 6): functions short enough to read (a report's
layout may run long: it is a declaration of the page), and no import cycle at run time."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "evalprism"
#: a function's body (its docstring left out) may run this long
LONG = 60
#: at most this many functions of logic run longer than LONG
MOST_LONG_LOGIC = 5
#: beyond this, only a report layout
LONGEST = 100


def _is_report(path: Path) -> bool:
    """Modules that lay out a report page or its figures (report.py, reports.py, the report package)."""
    return path.stem in ("report", "reports") or path.parent.name == "report"


def _body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    body = node.body
    docstring = isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant)
    start = body[1].lineno if docstring and len(body) > 1 else body[0].lineno
    assert node.end_lineno is not None
    return node.end_lineno - start + 1


def _functions() -> list[tuple[int, str, bool]]:
    """(body lines, place, whether it is a report layout) of every function of the package."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                place = f"{path.relative_to(SRC)}:{node.lineno} {node.name}"
                found.append((_body_lines(node), place, _is_report(path)))
    return found


def test_logic_functions_are_short() -> None:
    functions = _functions()
    assert len(functions) > 1000  # every module was read
    long_logic = sorted((n, place) for n, place, report in functions if n > LONG and not report)
    assert len(long_logic) <= MOST_LONG_LOGIC, f"logic functions over {LONG} lines: {long_logic}"
    longest = [(n, place) for n, place, report in functions if n > LONGEST and not report]
    assert longest == [], f"only a report layout may run over {LONGEST} lines: {longest}"


def _imports(path: Path, module: str, modules: set[str]) -> set[str]:
    """The package's modules ``module`` imports when it runs: at its top or inside a function, but not
    under ``if TYPE_CHECKING:`` (an annotation's name, which runs nothing)."""
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found: set[str] = set()

    class Visitor(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            test = node.test
            if getattr(test, "id", None) == "TYPE_CHECKING" or getattr(test, "attr", None) == "TYPE_CHECKING":
                for child in node.orelse:
                    self.visit(child)
                return
            self.generic_visit(node)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
            for alias in node.names:
                name = f"{base}.{alias.name}"
                found.add(name if name in modules else base)

        def visit_Import(self, node: ast.Import) -> None:
            found.update(alias.name for alias in node.names)

    Visitor().visit(ast.parse(path.read_text(encoding="utf-8")))
    return {m for m in found if m in modules and m != module}


def test_no_import_cycle_at_run_time() -> None:
    """Two modules that import each other (directly or around a loop) make the import order matter and
    the layers meaningless; a name needed only for a type is imported under TYPE_CHECKING."""
    paths = {}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        paths[name] = path
    graph = {name: _imports(path, name, set(paths)) for name, path in paths.items()}
    cycles = []
    for start in sorted(graph):  # a path from a module back to itself
        stack, seen = [(start, [start])], set()
        while stack:
            node, trail = stack.pop()
            for nxt in graph[node]:
                if nxt == start:
                    cycles.append(" -> ".join([*trail, start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*trail, nxt]))
    assert cycles == [], "import cycles:\n" + "\n".join(sorted(set(cycles))[:10])
