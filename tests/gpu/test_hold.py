"""The serving hold on a real card (``tests/gpu/hold_check.py``): the hold adds new segments
of the size asked, even where a cached block is larger, and serving draws on them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gpu.hold_check import CASES, check


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_hold_adds_its_size_and_serving_draws_on_it(name):
    from tests.conftest import need, need_module

    torch = need_module("gpu", "torch", "the hold is torch's caching allocator")
    need("gpu", torch.cuda.is_available(), "no CUDA device")
    assert check(name) == []


@pytest.mark.gpu
def test_the_hold_adds_its_size_under_expandable_segments_as_glm52_runs_torch():
    """``profiles/glm52.yaml`` sets ``expandable_segments:True``, which torch reads once, at
    its allocator's start: the same cases in a process of their own."""
    from tests.conftest import need, need_module

    torch = need_module("gpu", "torch", "the hold is torch's caching allocator")
    need("gpu", torch.cuda.is_available(), "no CUDA device")
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    argv = [sys.executable, str(root / "tests" / "gpu" / "hold_check.py")]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "(expandable segments)" in done.stdout, done.stdout
