"""Start-up cost (issue 14, section 3): each command imports only what it uses.

Every check runs the command in a fresh interpreter through the console entry point
(``evalprism.cli:main``) on tiny inputs; an ``atexit`` hook writes ``sorted(sys.modules)`` to a file
(stdout belongs to the command), and the test asserts which heavy stacks stayed out:

- ``p2l fit``, ``stem pool|locate|audit`` and ``judges`` with every embedding cached: no torch,
  sentence-transformers, transformers or openvino (``judges --engine ray``: no Ray either) (and ``p2l fit`` no scikit-learn or kmedoids);
- ``--help`` and ``--version``: none of numpy, pandas, scipy, scikit-learn, torch;
- every command refusing an input path (missing, a directory where a table is expected, an unknown
  format, a path that cannot be read): none of them either, and the reader's message (issue 38).

The lazy package namespaces that make this work (:mod:`evalprism._lazy`) must keep every public
name importable, listed by ``dir()``, and declared for static tools under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import read_run, run_process

pytestmark = pytest.mark.slow  # every check is a fresh interpreter

#: torch and what is built on it: only training, P2L inference and encoding new texts need them
TORCH_STACK = ("torch", "sentence_transformers", "transformers", "openvino")
#: what --help, --version and a refused input path must not import
NUMERIC_STACK = ("numpy", "pandas", "scipy", "sklearn", "torch")
LAZY_PACKAGES = (
    "evalprism.p2l",
    "evalprism.stats",
    "evalprism.stem",
    "evalprism.judges",
    "evalprism.ecdf",
    "evalprism.serve",
    "evalprism.compare",
)

_RUN_COMMAND = """
import atexit, json, sys

dump, args = sys.argv[1], sys.argv[2:]
atexit.register(lambda: open(dump, "w").write(json.dumps(sorted(sys.modules))))
sys.argv = ["evalprism", *args]
from evalprism.cli import main

main()
"""


def run_command(
    args: list[object], dump: Path, cwd: Path | None = None
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """``evalprism ARGS`` in a fresh interpreter: how it ended, and the modules it imported."""
    done = run_process([sys.executable, "-c", _RUN_COMMAND, dump, *args], cwd)
    return done, set(json.loads(dump.read_text()))


def command_modules(args: list[object], dump: Path) -> set[str]:
    """The modules ``evalprism ARGS`` imported, run in a fresh interpreter; the command must succeed."""
    done, modules = run_command(args, dump)
    assert done.returncode == 0, done.stderr
    return modules


def script_modules(code: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``code``."""
    done = run_process([sys.executable, "-c", f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"])
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def loaded(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return [name for name in names if name in modules]


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["--version"],
        ["p2l", "--help"],
        ["p2l", "fit", "--help"],
        ["stem", "pool", "--help"],
        ["judges", "--help"],
    ],
    ids=" ".join,
)
def test_help_and_version_import_no_numeric_stack(args: list[str], tmp_path: Path) -> None:
    assert loaded(command_modules(args, tmp_path / "modules.json"), NUMERIC_STACK) == []


#: (command line, what its one error line says): each refused for an input path before anything is read.
#: Run in a folder holding prompts.txt, costs.csv, correctness.csv, models.csv, config.yaml and a folder
#: dir.csv, so that a refusal of the later input shows that the earlier ones were not read first.
REFUSED_INPUTS = [
    ("ecdf nosuch.csv --out o", "nosuch.csv: file not found"),
    ("ecdf dir.csv --out o", "dir.csv: is a directory; expected a table file"),
    ("ecdf prompts.txt --out o", "prompts.txt: unknown table format '.txt'"),
    ("judges nosuch.csv --out o", "nosuch.csv: file not found"),
    (
        "judges --qrels nosuch.qrels --qrels b=costs.csv --topics x --passages y --out o",
        "nosuch.qrels: file not found (qrels)",
    ),
    ("compare correctness.csv nosuch.csv --out o", "nosuch.csv: file not found"),
    ("p2l fit nosuch.jsonl --out o", "nosuch.jsonl: file not found"),
    ("p2l split nosuch.jsonl --out o", "nosuch.jsonl: file not found"),
    ("p2l train nosuch.jsonl --out o", "nosuch.jsonl: file not found"),
    ("p2l leaderboard nosuch_model prompts.txt --out o", "nosuch_model: no such model directory"),
    ("p2l evaluate nosuch_model nosuch.eval --out o", "nosuch.eval: file not found"),
    ("p2l route nosuch_model prompts.txt --costs costs.csv --out o", "nosuch_model: no such model directory"),
    ("stem pool correctness.csv --models nosuch.csv --out o", "nosuch.csv: file not found"),
    ("stem locate nosuch_pool correctness.csv --out o", "nosuch_pool: no such pool directory"),
    ("stem plan nosuch_pool --out o", "nosuch_pool: no such pool directory"),
    ("stem audit correctness.csv --models notadir/x.csv --out o", "notadir/x.csv: cannot be read (Not a directory)"),
    ("serve nosuch_model --config config.yaml", "nosuch_model: no such model directory"),
    ("serve model --config nosuch.yaml", "nosuch.yaml: file not found"),
]


@pytest.mark.parametrize(("command", "message"), REFUSED_INPUTS, ids=[c for c, _ in REFUSED_INPUTS])
def test_refused_input_answers_before_the_numeric_stack_loads(command: str, message: str, tmp_path: Path) -> None:
    """Issue 38: a refused input path is said by name before numpy, pandas, scipy, scikit-learn or torch is
    imported (it used to cost the whole stack: 3 s of CPU and 200 MB for a typo), with the reader's message."""
    for name, text in {
        "prompts.txt": "What is 2 + 2?\n",
        "costs.csv": "model,cost\na,1\n",
        "correctness.csv": "model,item_id,score\na,q1,1\n",
        "models.csv": "model,params,family\na,1,toy\n",
        "config.yaml": "models: {}\n",
        "notadir": "a file, not a folder\n",
    }.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "dir.csv").mkdir()
    done, modules = run_command(command.split(), tmp_path / "modules.json", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
    assert loaded(modules, NUMERIC_STACK) == []
    assert not (tmp_path / "o").exists()


def test_p2l_fit_imports_no_torch_nor_scikit_learn(tmp_path: Path) -> None:
    from evalprism.p2l.simulate import simulate_topic_battles

    battles = tmp_path / "battles.jsonl"
    simulate_topic_battles(120, seed=0).to_json(battles, orient="records", lines=True)
    out = tmp_path / "out"
    modules = command_modules(["p2l", "fit", battles, "--out", out, "-q"], tmp_path / "modules.json")
    assert (out / "leaderboard.csv").exists()
    assert loaded(modules, (*TORCH_STACK, "sklearn", "kmedoids")) == []


def test_stem_pool_audit_locate_import_no_torch(tmp_path: Path) -> None:
    from evalprism.stem.simulate import simulate_family

    correctness, meta = simulate_family(n_items=300, seed=0)
    corr, models = tmp_path / "correctness.csv", tmp_path / "models.csv"
    correctness.to_csv(corr, index=False)
    meta.to_csv(models, index=False)
    family = ["--models", models, "--family", "toy"]
    runs = {
        "pool": ["stem", "pool", corr, *family, "--out", tmp_path / "pool"],
        "audit": ["stem", "audit", corr, *family, "--out", tmp_path / "audit"],
        "locate": [
            "stem",
            "locate",
            tmp_path / "pool",
            corr,
            "--model",
            "other-a",
            "--items",
            "50",
            "--trials",
            "5",
            "--out",
            tmp_path / "locate",
            "-q",
        ],
    }
    for name, args in runs.items():  # in this order: locate reads the pool
        modules = command_modules(args, tmp_path / f"{name}.json")
        assert loaded(modules, TORCH_STACK) == [], name
    assert (tmp_path / "locate" / "localization.json").exists()


def test_judges_with_cached_embeddings_imports_no_torch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fill the cache through the analysis itself with a stand-in encoder (genre-clustered vectors,
    no model), so it holds exactly the keys the command asks for; the command must then encode
    nothing and never load sentence-transformers."""
    from evalprism.embed.backends import SentenceTransformerBackend
    from evalprism.judges import DEFAULT_INSTRUCTION, JudgesOptions, analyze, pair_text
    from evalprism.judges.simulate import genre_embeddings, simulate_judgments

    table = simulate_judgments()
    # the stand-in's vectors have the model's own length (384): the cache checks entries against it
    vectors = {
        f"{DEFAULT_INSTRUCTION} {pair_text(q, d)}": v
        for q, d, v in zip(table["query"], table["doc"], genre_embeddings(table, dim=384, spread=0.01), strict=True)
    }
    monkeypatch.setattr(
        SentenceTransformerBackend, "encode", lambda self, texts, batch_size=64: np.stack([vectors[t] for t in texts])
    )
    cache = tmp_path / "cache"
    analyze(table, JudgesOptions(human="human", llm=["llm_strict", "llm_lenient"]), cache_dir=cache, progress=False)
    path, out = tmp_path / "judgments.csv", tmp_path / "out"
    table.to_csv(path, index=False)
    args = ["judges", path, "--human", "human", "--llm", "llm_strict,llm_lenient", "--out", out, "--cache-dir", cache]
    modules = command_modules([*args, "-q"], tmp_path / "modules.json")
    stats = read_run(out).results["embedding"][0]
    assert stats["encoded"] == 0 and stats["cached"] == stats["distinct"] > 0
    assert loaded(modules, TORCH_STACK) == []
    # --engine ray with nothing to encode starts no Ray and imports none of it
    ray_out = tmp_path / "out-ray"
    modules = command_modules(
        [*args[:-4], "--out", ray_out, "--cache-dir", cache, "--engine", "ray", "-q"], tmp_path / "ray.json"
    )
    assert read_run(ray_out).results["embedding"][0]["encoded"] == 0
    assert loaded(modules, (*TORCH_STACK, "ray")) == []


#: at exit, after every other handler (registered first, so run last): how much of the heap the
#: interpreter's shutdown collections would still examine
_EXIT_STATE = """
import atexit, gc, json, sys

dump, args = sys.argv[1], sys.argv[2:]
state = lambda: {"frozen": gc.get_freeze_count(), "tracked": len(gc.get_objects())}
atexit.register(lambda: open(dump, "w").write(json.dumps(state())))
sys.argv = ["evalprism", *args]
from evalprism.cli import main

main()
"""


def test_command_exits_without_the_shutdown_walking_its_heap(tmp_path: Path) -> None:
    """Issue 38: `p2l leaderboard` took minutes to exit on a busy machine after writing its output: the
    interpreter's shutdown ran full garbage collections over the whole heap the run left (evalprism.shutdown).
    At exit the objects are frozen, so those collections see next to nothing, whichever way the command ends."""
    from evalprism.p2l.simulate import simulate_topic_battles

    battles = tmp_path / "battles.jsonl"
    simulate_topic_battles(120, seed=0).to_json(battles, orient="records", lines=True)
    runs = {"ok": ["p2l", "fit", battles, "--out", tmp_path / "out", "-q"], "refused": ["p2l", "fit", battles]}
    for name, args in runs.items():
        dump = tmp_path / f"{name}.json"
        done = run_process([sys.executable, "-c", _EXIT_STATE, dump, *args])
        assert done.returncode == (0 if name == "ok" else 2), done.stderr
        state = json.loads(dump.read_text())
        assert state["frozen"] > 20 * state["tracked"], (name, state)
    assert (tmp_path / "out" / "leaderboard.csv").exists()


def test_lazy_packages_import_nothing_heavy_until_a_name_is_used() -> None:
    modules = script_modules("; ".join(f"import {p}" for p in LAZY_PACKAGES))
    assert loaded(modules, NUMERIC_STACK + TORCH_STACK) == []


#: what the numeric kernels must never import: they take arrays (numpy / scipy), not tables or tensors
NOT_IN_STATS = ("pandas", "torch", "evalprism.io")
STATS_MODULES = sorted(
    f"evalprism.stats.{m.name}"
    for m in pkgutil.iter_modules(importlib.util.find_spec("evalprism.stats").submodule_search_locations)
)


@pytest.mark.parametrize(
    "code",
    [
        "import evalprism.stats as s; [getattr(s, name) for name in s.__all__]",
        *(f"import {module}" for module in STATS_MODULES),
    ],
)
def test_stats_imports_no_pandas_torch_or_readers(code: str) -> None:
    """Issue 15: ``evalprism.stats`` is numpy / scipy only; each submodule, and every public name,
    loads in a fresh interpreter without pandas, torch or evalprism.io (third-party packages that
    pull pandas in, scikit-learn and kmedoids, are imported where they are called)."""
    modules = script_modules(code)
    assert [m for m in sorted(modules) if any(m == p or m.startswith(p + ".") for p in NOT_IN_STATS)] == []


def _type_checking_imports(package: str) -> dict[str, str]:
    """name -> submodule, from the ``if TYPE_CHECKING:`` imports of the package's ``__init__``."""
    tree = ast.parse(Path(importlib.import_module(package).__file__).read_text())
    names = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.module.startswith(f"{package}.")
                names |= {alias.name: imp.module.rsplit(".", 1)[1] for alias in imp.names}
    return names


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_lazy_package_names_resolve_and_agree_with_static_imports(package: str) -> None:
    module = importlib.import_module(package)
    exports = module._lazy_exports
    assert _type_checking_imports(package) == exports  # what static tools see is what loads
    assert set(module.__all__) <= set(exports)
    listed = dir(module)
    for name in exports:
        assert getattr(module, name) is getattr(importlib.import_module(f"{package}.{exports[name]}"), name)
        assert name in listed
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = module.no_such_name


def test_function_named_like_its_submodule_stays_the_function() -> None:
    """Importing ``evalprism.stats.kmedoids`` binds the submodule on the package; the public name must
    still be the function, whichever comes first (as with an eager ``from .kmedoids import kmedoids``)."""
    code = """
import evalprism.stats.kmedoids
from evalprism.stats import kmedoids
import evalprism.stats as stats
print(all(callable(f) and f.__name__ == n for f, n in [(kmedoids, "kmedoids"), (stats.kmedoids, "kmedoids")]))
"""
    done = run_process([sys.executable, "-c", code])
    assert done.stdout.strip() == "True", done.stderr
