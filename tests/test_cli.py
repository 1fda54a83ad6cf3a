"""The command line end to end on a small fixture, and every bad input it must explain."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from helpers import HANG_LIMIT_S, run_cli, small_responses

from evalprism.ecdf.options import EcdfOptions

SETTINGS_COLUMNS = [
    "model",
    "temperature",
    "question_id",
    "group",
    "n_responses",
    "mean_score",
    "cluster",
    "is_medoid",
    "final_answer",
    "correct",
]


def test_ecdf_end_to_end(tmp_path: Path, responses_csv: Path, cache_dir: Path, capsys) -> None:
    out = tmp_path / "out"
    code, _, err = run_cli(
        ["ecdf", responses_csv, "--out", out, "--by", "model", "--by", "temperature", "--clusters", "2", "-q"], capsys
    )
    assert code == 0, err
    assert sorted(p.name for p in out.iterdir()) == [
        "accuracy.csv",
        "clusters.csv",
        "comparisons.csv",
        "factors.csv",
        "report.html",
        "run.json",
        "settings.csv",
    ]
    settings = pd.read_csv(out / "settings.csv")
    assert all(c in settings.columns for c in SETTINGS_COLUMNS)
    assert settings["is_medoid"].sum() == 2
    clusters = pd.read_csv(out / "clusters.csv")
    assert clusters.columns[:5].tolist() == ["cluster", "size", "wins", "medoid_setting", "mean_score"]
    html = (out / "report.html").read_text()
    assert "How to read this" in html and "<script src=" not in html  # plotly.js is inline: opens offline
    assert html.count("Plotly.newPlot") >= 3


def test_pam_method_and_extract_options(tmp_path: Path, cache_dir: Path, capsys) -> None:
    table = small_responses()
    table["response"] = "Reasoning... Final: " + table["response"].astype(str) + " <end>"
    path = tmp_path / "r.jsonl"
    table.to_json(path, orient="records", lines=True)
    out = tmp_path / "out"
    code, _, err = run_cli(
        [
            "ecdf",
            path,
            "--out",
            out,
            "--by",
            "model",
            "-k",
            "2",
            "--method",
            "pam",
            "--extract",
            r"Final: (.*?) <end>",
            "-q",
        ],
        capsys,
    )
    assert code == 0, err
    s = pd.read_csv(out / "settings.csv")
    assert set(s.loc[s["model"] == "good", "final_answer"]) == {"Paris", "Mount Fuji", "2003"}


def write(tmp_path: Path, frame: pd.DataFrame, name: str = "r.csv") -> Path:
    path = tmp_path / name
    frame.to_csv(path, index=False)
    return path


@pytest.mark.parametrize(
    "case,message",
    [
        ("missing_column", "missing required column 'question_id'"),
        ("empty_file", "the file is empty"),
        ("empty_table", "the responses table is empty"),
        ("non_numeric", "row 3, column 'score': expected a number, got 'n/a'"),
        ("too_many_clusters", "--clusters 99: K must be between 1 and the number of settings (12)"),
        ("unreadable", "cannot be read as parquet"),
        ("no_responses", "has no responses"),
        ("bad_clusters", "--clusters: expected a whole number or 'auto', got 'lots'"),
        ("missing_by", "--by column 'persona' not found"),
    ],
)
def test_bad_input_gets_one_message_and_exit_2(
    tmp_path: Path, cache_dir: Path, capsys, case: str, message: str
) -> None:
    table = small_responses()
    args: list[str] = ["--by", "model", "--by", "temperature"]
    if case == "missing_column":
        path = write(tmp_path, table.drop(columns=["question_id"]))
    elif case == "empty_file":
        path = tmp_path / "r.csv"
        path.write_text("")
    elif case == "empty_table":
        path = tmp_path / "r.csv"
        path.write_text("question_id,response,references\n")
    elif case == "non_numeric":
        path = write(tmp_path, pd.DataFrame({"question_id": [1, 2, 3], "score": ["0.1", "0.2", "n/a"]}))
        args = []
    elif case == "too_many_clusters":
        path = write(tmp_path, table)
        args += ["--clusters", "99"]
    elif case == "unreadable":
        path = tmp_path / "r.parquet"
        path.write_bytes(b"\x00garbage")
    elif case == "no_responses":
        table.loc[(table["model"] == "bad") & (table["question_id"] == "q1"), "response"] = None
        path = write(tmp_path, table)
    elif case == "bad_clusters":
        path = write(tmp_path, table)
        args += ["--clusters", "lots"]
    else:
        path = write(tmp_path, table)
        args = ["--by", "persona"]
    out = tmp_path / "out"
    code, _stdout, err = run_cli(["ecdf", path, "--out", out, "-q", *args], capsys)
    assert code == 2
    assert message in " ".join(err.split()), err
    assert err.count("error:") == 1 and "Traceback" not in err
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


@pytest.mark.slow
def test_real_process_exit_code_without_traceback(tmp_path: Path) -> None:
    path = write(tmp_path, small_responses().drop(columns=["references"]))
    proc = subprocess.run(
        [sys.executable, "-m", "evalprism.cli", "ecdf", str(path), "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=HANG_LIMIT_S,
        check=False,
    )
    assert proc.returncode == 2
    assert "needs one of the columns 'references', 'score'" in " ".join(proc.stderr.split())
    assert "Traceback" not in proc.stderr


def _cli_flags() -> set[str]:
    """Every option flag of every command of the CLI (from click's own parameter table)."""
    import click
    import typer.main

    from evalprism.cli import app

    flags: set[str] = set()

    def walk(command: click.Command) -> None:
        for param in command.params:
            flags.update(o for o in getattr(param, "opts", []) if o.startswith("--"))
        for sub in getattr(command, "commands", {}).values():
            walk(sub)

    walk(typer.main.get_command(app))
    return flags


#: parameters of the library that no command exposes (their messages keep the library name)
LIBRARY_ONLY_PARAMETERS = {
    "cluster_selection_epsilon",
    "umap_neighbors",
    "max_cluster_share",
    "min_clusters",
    "min_query_share",
    "purity_percentile",
    "confidence",
    "iqr_k",
    "flip_low",
    "flip_high",
}


def test_every_parameter_a_library_message_names_maps_to_a_real_flag() -> None:
    """Library messages name parameters (``val_fraction``) and the CLI shows the flag (``--val-fraction``):
    the flag a command's options class declares for that field (``n_components`` -> ``--components``),
    else ``--`` and the name (``evalprism.cli.flag_of``). Every parameter the library names must map to a
    flag that exists, or be one no command exposes."""
    import re

    from test_numbers import _declared_fields

    from evalprism.cli import flag_of

    declared = {f.name: f.declared.flag_names(f.name)[0] for f in _declared_fields() if f.declared.shown}

    src = Path(__file__).resolve().parents[1] / "src" / "evalprism"
    named: set[str] = set()
    for path in src.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        named.update(re.findall(r'parameter="([a-z_]+)"', text))
        named.update(re.findall(r'check_number\("([a-z_]+)"', text))
    flags = _cli_flags()
    assert {"resume", "by", "clusters", "val_fraction", "n_components"} <= named
    shown = {p: declared.get(p, flag_of(p)) for p in named}
    unmapped = {p: flag for p, flag in shown.items() if p not in LIBRARY_ONLY_PARAMETERS and flag not in flags}
    assert not unmapped, f"library parameters whose flag does not exist: {unmapped}"
    assert LIBRARY_ONLY_PARAMETERS.isdisjoint({p for p, flag in shown.items() if flag in flags})


def _message_text(node: ast.expr) -> str:
    """A message as written in the call: string literals and the literal parts of f-strings joined
    (``+`` and implicit concatenation included), every computed part as ``{}``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_message_text(part) for part in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _message_text(node.left) + _message_text(node.right)
    return "{}"


def test_library_messages_name_parameters_not_flags() -> None:
    """The rule: a library message (the first argument of an ``EvalprismError(...)`` call in any module
    but ``cli.py``) never names an evalprism flag, except inside a command written between backticks
    that starts with ``evalprism`` or one of its commands (such as ``stem pool --panel``: something to run).
    Elsewhere it names the library parameter and passes ``parameter=``, which the CLI spells as the flag
    (a library user has no flags). A flag built at run time (``--{name}``) counts as a flag. Flags of
    other tools (``lm_eval --log_samples``) are not evalprism's and stay."""
    import re

    import typer.main

    from evalprism.cli import app

    flags = _cli_flags()
    commands = {"evalprism", *typer.main.get_command(app).commands}  # type: ignore[attr-defined]
    src = Path(__file__).resolve().parents[1] / "src" / "evalprism"
    found = []
    checked = 0
    for path in sorted(src.rglob("*.py")):
        if path == src / "cli.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and node.args):
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            if name != "EvalprismError":
                continue
            checked += 1
            message = _message_text(node.args[0])
            commands_written = [m for m in re.findall(r"`([^`]*)`", message) if m.split(" ", 1)[0] in commands]
            outside = message
            for written in commands_written:
                outside = outside.replace(f"`{written}`", "")
            named = [f for f in re.findall(r"--[a-z{][\w{}-]*", outside) if f in flags or f.startswith("--{")]
            if named:
                found.append(f"{path.relative_to(src)}:{node.lineno}: {named} in {message!r}")
    assert checked > 300  # every message was read, not a few
    assert not found, "library messages naming CLI flags:\n" + "\n".join(found)


def test_a_library_message_names_the_parameter_and_the_cli_the_flag(
    tmp_path: Path, responses_csv: Path, capsys
) -> None:
    from evalprism.ecdf import analyze
    from evalprism.errors import EvalprismError

    with pytest.raises(EvalprismError) as caught:
        analyze(small_responses(), EcdfOptions(by=["persona"]), progress=False)
    assert "by column 'persona' not found" in str(caught.value) and "--by" not in str(caught.value)
    code, _, err = run_cli(["ecdf", responses_csv, "--out", tmp_path / "o", "--by", "persona", "-q"], capsys)
    assert code == 2 and "--by column 'persona' not found" in err
    with pytest.raises(EvalprismError, match=r"^n_components 50 is larger"):
        from evalprism.judges import ClusterOptions

        ClusterOptions(n_components=50).check_shape(n_pairs=10)


def test_the_flag_replaces_the_parameter_but_never_a_path_or_a_value_the_user_gave() -> None:
    from evalprism.errors import EvalprismError

    exc = EvalprismError(
        "/runs/overwrite/out: holds the output of `evalprism ecdf`; pass overwrite to replace it", parameter="overwrite"
    )
    assert exc.naming("--overwrite") == (
        "/runs/overwrite/out: holds the output of `evalprism ecdf`; pass --overwrite to replace it"
    )
    exc = EvalprismError("model.csv: holds 2 models ('model', 'b'); choose one (model)", parameter="model")
    assert exc.naming("--model") == "model.csv: holds 2 models ('model', 'b'); choose one (--model)"
    exc = EvalprismError("by 'by': a setting column cannot be one of the canonical columns", parameter="by")
    assert exc.naming("--by") == "--by 'by': a setting column cannot be one of the canonical columns"
