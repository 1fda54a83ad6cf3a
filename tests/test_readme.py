"""The README opens with exactly two commands, and CI runs the second one verbatim."""

from __future__ import annotations

import re

from helpers import REPO


def test_ci_runs_the_readme_test_command() -> None:
    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)\n```", readme, flags=re.S)
    setup_demo, tests = blocks[0].strip(), blocks[1].strip()
    assert readme.index(blocks[0]) < readme.index("The first command")
    assert setup_demo.endswith("evalprism demo") and "torch==2.13.0" in setup_demo
    assert "pytest" in tests and "torch==2.13.0" in tests
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert tests in ci
