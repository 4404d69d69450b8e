"""The launch names one ptxas for every process of a boot (``launch/toolchain.py``)."""

from __future__ import annotations

import importlib
import stat
import sys
from pathlib import Path

import pytest

from launcher.launch import toolchain
from launcher.launch.toolchain import PTXAS_ENV, pinned_env


@pytest.fixture
def fake_torch(tmp_path, monkeypatch) -> Path:
    """A ``torch`` package on ``sys.path`` ahead of any installed one, with ``bin/``: real
    files, found by the same lookup the launch uses (``find_spec``, no import)."""
    package = tmp_path / "site" / "torch"
    (package / "bin").mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('the launch must not import torch')\n")
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    return package


def _executable(path: Path) -> Path:
    path.write_text("#!/bin/sh\necho ptxas\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_the_launch_pins_torchs_ptxas_without_importing_torch(fake_torch):
    ptxas = _executable(fake_torch / "bin" / "ptxas")
    assert pinned_env({}, {}) == {PTXAS_ENV: str(ptxas)}
    assert "torch" not in sys.modules


def test_a_ptxas_named_by_the_profile_or_the_caller_is_kept(fake_torch):
    _executable(fake_torch / "bin" / "ptxas")
    assert pinned_env({PTXAS_ENV: "/opt/cuda/bin/ptxas"}, {}) == {}
    assert pinned_env({}, {PTXAS_ENV: "/opt/cuda/bin/ptxas"}) == {}


def test_a_ptxas_that_is_not_executable_is_not_pinned(fake_torch):
    (fake_torch / "bin" / "ptxas").write_text("not a program\n")
    assert pinned_env({}, {}) == {}


def test_a_torch_without_ptxas_pins_nothing(fake_torch):
    assert toolchain.torch_ptxas() is None
    assert pinned_env({}, {}) == {}


def test_the_printed_command_carries_the_pin(fake_torch):
    from launcher import pipeline
    from tests.conftest import PROFILES

    ptxas = _executable(fake_torch / "bin" / "ptxas")
    loaded = pipeline.load(str(PROFILES / "glm52.yaml"))
    planned = pipeline.make_plan(loaded, calibrate=False)
    assert planned.command.env[PTXAS_ENV] == str(ptxas)


def test_a_ptxas_in_the_profiles_env_reaches_the_command_unchanged(fake_torch):
    from launcher import pipeline
    from tests.conftest import PROFILES

    _executable(fake_torch / "bin" / "ptxas")
    loaded = pipeline.load(
        str(PROFILES / "glm52.yaml"), ("env.TRITON_PTXAS_PATH=/opt/cuda/bin/ptxas",)
    )
    planned = pipeline.make_plan(loaded, calibrate=False)
    assert planned.command.env[PTXAS_ENV] == "/opt/cuda/bin/ptxas"
