"""Numeric options are declared once (evalprism.vocabularies.NUMBERS): the library's check, its
message and the command line's bounds all come from the same Bounds (issue 31, item 3)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from helpers import cli_parameters, run_cli

from evalprism.errors import EvalprismError
from evalprism.io.options import Field, Options, check_number, check_seed, declared_fields
from evalprism.vocabularies import MAX_SEED, NUMBERS, Bounds

SRC = Path(__file__).resolve().parents[1] / "src" / "evalprism"


def _declared_fields() -> list[Field]:
    """Every declared field of every options class the command line takes."""
    import evalprism.cli  # noqa: F401  # imports every options class

    kinds: list[type[Options]] = []
    todo = list(Options.__subclasses__())
    while todo:
        kind = todo.pop()
        kinds.append(kind)
        todo.extend(kind.__subclasses__())
    return [f for kind in kinds for f in declared_fields(kind) if isinstance(f, Field)]


def test_every_bounded_field_shows_its_declared_bounds_in_its_flags_help() -> None:
    """A flag whose field has bounds says them in its help, in the words of the check's message."""
    shown: dict[str, list[str]] = {}
    for _, p in cli_parameters():
        if getattr(p, "opts", None):
            shown.setdefault(p.opts[0], []).append(" ".join((p.help or "").split()))
    bounded = [f for f in _declared_fields() if f.bounds_name is not None and f.declared.shown]
    flags = {f.declared.flag_names(f.name)[0] for f in bounded}
    # the options bounded before the declaration (their bounds were literals in cli.py), and more may come
    assert {"--components", "--min-cluster-size", "--rounds", "--epochs", "--trials", "--stage", "--seed"} <= flags
    for f in bounded:
        flag = f.declared.flag_names(f.name)[0]
        assert any(f"[{NUMBERS[f.bounds_name].expected()}]" in h for h in shown[flag]), f"{flag}: {shown[flag]}"
    assert not [p.opts[0] for _, p in cli_parameters() if getattr(p, "min", None) is not None]  # no typer range


def test_the_cli_writes_no_bound_and_no_check_restates_one() -> None:
    """No number literal for a bound in cli.py; check_number's bounds come from NUMBERS except where
    a bound is another value (flip_high above flip_low)."""
    cli = (SRC / "cli.py").read_text(encoding="utf-8")
    assert not re.findall(r"\b(?:min|max)=\s*-?\d", cli)
    overrides = []
    for path in SRC.rglob("*.py"):
        for call in re.findall(r"check_number\([^()]*(?:\([^()]*\)[^()]*)*\)", path.read_text(encoding="utf-8")):
            if re.search(r"\b(?:low|high|low_open|high_open|integer)=", call) and path != SRC / "io" / "options.py":
                overrides.append(call)
    assert overrides == ['check_number("flip_high", self.flip_high, low=self.flip_low)']


def _checked_names() -> set[str]:
    """The parameter names the library checks: by check_number literally, or as a declared options
    field with bounds (every options class checks its fields when constructed)."""
    names: set[str] = set()
    for path in SRC.rglob("*.py"):
        names.update(re.findall(r'check_number\(\s*"([a-z_]+)"', path.read_text(encoding="utf-8")))
    names.update(f.bounds_name for f in _declared_fields() if f.bounds_name is not None)
    return names


def test_every_declared_number_is_checked_and_every_check_is_declared() -> None:
    """A declaration no check reads is dead; a check of an undeclared name would fail with a KeyError."""
    checked = _checked_names()
    assert set(NUMBERS) - checked == set(), "declared but never checked"
    assert checked - set(NUMBERS) == set(), "checked but not declared"


@pytest.mark.parametrize(
    "name, good, bad, message",
    [
        ("min_cluster_size", [2, 40, 2.0], [1, 0, 2.5], "min_cluster_size: expected a whole number >= 2, got 1"),
        ("confidence", [0.5, 1e-9, 0.999], [0, 1, -0.1], "confidence: expected a finite number > 0 and < 1, got 0"),
        (
            "purity_percentile",
            [100, 0.5],
            [0, 100.5],
            "purity_percentile: expected a finite number > 0 and <= 100, got 0",
        ),
        ("tau", [0, 2, 0.5], [-0.1, 2.1], "tau: expected a finite number from 0 to 2, got -0.1"),
        ("lr", [1e-12, 5], [0, -1e-3], "lr: expected a finite number > 0, got 0"),
        ("trials", [0, 100], [-1, 0.5], "trials: expected a whole number >= 0, got -1"),
        ("port", [1, 65535], [0, 65536], "port: expected a whole number from 1 to 65535, got 0"),
        ("seed", [0, MAX_SEED], [-1, MAX_SEED + 1], "seed: expected a whole number from 0 to 4294967295, got -1"),
    ],
)
def test_check_number_ends_and_messages(name: str, good: list, bad: list, message: str) -> None:
    for value in good:
        assert check_number(name, value) == float(value)
    for value in bad:
        with pytest.raises(EvalprismError) as err:
            check_number(name, value)
        assert err.value.parameter == name
    with pytest.raises(EvalprismError) as err:
        check_number(name, bad[0])
    assert str(err.value) == message


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, True, "3", None, [3]])
def test_check_number_refuses_what_is_no_finite_number(value: object) -> None:
    with pytest.raises(EvalprismError, match=r"^items: expected a whole number >= 1, got "):
        check_number("items", value)


def test_a_bound_that_is_another_value_is_given_at_the_check() -> None:
    assert check_number("flip_high", 0.31, low=0.3) == 0.31
    with pytest.raises(EvalprismError, match=r"^flip_high: expected a finite number > 0.3 and <= 1, got 0.3$"):
        check_number("flip_high", 0.3, low=0.3)
    from evalprism.judges import BiasRules

    with pytest.raises(EvalprismError, match=r"^flip_high: expected a finite number > 0.6 and <= 1, got 0.5$"):
        BiasRules(flip_low=0.6, flip_high=0.5)


def test_check_seed_is_the_declared_seed_rule() -> None:
    assert check_seed(None) is None and check_seed(7) == 7 and check_seed(np.int64(7)) == 7
    assert NUMBERS["seed"] == Bounds(0, MAX_SEED, integer=True)
    with pytest.raises(EvalprismError, match=r"^seed: expected a whole number from 0 to 4294967295, got '7'$"):
        check_seed("7")


def test_bounds_words() -> None:
    assert Bounds(0, 1, low_open=True, high_open=True).expected() == "a finite number > 0 and < 1"
    assert Bounds(-1, 1).expected() == "a finite number from -1 to 1"
    assert Bounds(2.5e-5).expected() == "a finite number >= 2.5e-05"
    assert Bounds().expected() == "a finite number"


def test_a_bound_out_of_range_on_the_command_line_names_the_flag_before_reading_input(tmp_path: Path, capsys) -> None:
    """The judgments file does not exist: the bound is refused first, when the flags become the
    command's options, in the check's words with the flag."""
    missing = tmp_path / "none.csv"
    code, out, err = run_cli(["judges", missing, "--llm", "x", "--components", "0", "--out", tmp_path / "o"], capsys)
    assert code == 2 and out == ""
    assert "error: --components: expected a whole number >= 1, got 0" in err and "none.csv" not in err
    assert not (tmp_path / "o").exists()
    code, _, err = run_cli(["compare", missing, missing, "--permutations", "0", "--out", tmp_path / "o"], capsys)
    assert code == 2
    assert "error: --permutations: expected a whole number >= 1, got 0" in err and "none.csv" not in err


def test_one_dimension_is_a_reduction_the_library_and_the_cli_accept() -> None:
    """--components 1 was refused by the CLI (min=2) though the library took it: PCA to one
    dimension separates two far blobs, and HDBSCAN finds them."""
    from evalprism.judges.clustering import ClusterOptions, cluster_pairs, reduce_dimensions

    rng = np.random.default_rng(0)
    x = np.vstack([rng.normal(size=(40, 8)), rng.normal(size=(40, 8)) + 10])
    options = ClusterOptions(n_components=1, min_cluster_size=10)
    z = reduce_dimensions(x, options)
    assert z.shape == (80, 1)
    labels = cluster_pairs(z, options)
    assert set(labels[:40]) == {labels[0]} and set(labels[40:]) == {labels[40]} and labels[0] != labels[40]


@pytest.mark.parametrize("seed, ok", [("0", True), ("4294967295", True), ("-1", False), ("4294967296", False)])
def test_the_routing_service_config_seed_follows_the_one_seed_rule(tmp_path: Path, seed: str, ok: bool) -> None:
    """A negative seed in router.yaml used to pass the config and fail at the first mixed routing
    decision (numpy refuses it); now the config is refused with the seed rule's words."""
    from evalprism.serve.config import load_config

    path = tmp_path / "router.yaml"
    path.write_text(f"models: {{a: {{base_url: 'http://x/v1', cost: 1}}}}\nseed: {seed}\n", encoding="utf-8")
    if ok:
        assert load_config(path).seed == int(seed)
        return
    with pytest.raises(EvalprismError) as err:
        load_config(path)
    assert f"seed: expected a whole number from 0 to 4294967295 (got {seed})" in str(err.value), str(err.value)
