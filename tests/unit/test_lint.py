"""The tree stays ruff clean. ruff comes with the test extras: run from this interpreter's
environment (CI's venv is not on PATH), and fail, not skip, when it is missing."""

import subprocess
import sys

from tests.conftest import ROOT


def test_ruff_clean():
    out = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--output-format", "concise",
         "launcher", "tests", "benchmarks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert "No module named ruff" not in out.stderr, "ruff is missing: pip install -e '.[test]'"
    assert out.returncode == 0, out.stdout + out.stderr
