"""The planned worker's own code on a real GPU: measure, size, record, calibrate, watch."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

MiB = 1024**2


@pytest.fixture(scope="module")
def result(cuda_device, tmp_path_factory):
    out = tmp_path_factory.mktemp("worker") / "result.json"
    subprocess.run(
        [sys.executable, "-m", "tests.gpu.planned_worker_child", str(out)],
        cwd=ROOT,
        check=True,
        timeout=300,
    )
    return json.loads(out.read_text())


def test_the_prewarm_memory_is_measured_physically(result):
    m = result["record"]["prewarm_measurement"]
    assert m["retained_bytes"] > 3000 * MiB  # the local-memory kernel's growth
    assert abs(m["torch_reserved_delta"]) < 64 * MiB  # which torch never saw
    assert result["record"]["measured"]["workspaces"] == m["retained_bytes"]


def test_the_budget_keeps_the_measured_headroom_and_margin(result):
    b = result["record"]["budget"]
    assert b["bytes"] == result["budget"]
    assert result["record"]["measured"]["jit_headroom"] == b["jit_headroom"] > 64 * MiB


def test_the_request_after_sizing_fits_and_compiles_nothing(result):
    assert result["late_compiles"] == 0
    assert result["min_free_after_sizing"] >= 512 * MiB


def test_the_next_plan_uses_the_measurements(result):
    cal = result["calibrated"]
    assert cal["jit_headroom"] == [result["record"]["measured"]["jit_headroom"], "measured"]
    assert cal["workspaces"][1] == "measured" and cal["cuda_context"][1] == "measured"
