"""The prewarm physics on a real card (see benchmarks/gpu_prewarm.py for the workload).

Scenario A sizes the KV cache before the first request runs, as upstream vLLM does;
scenario B prewarms under ``launcher.gpu.measure`` first. Each runs in a fresh process.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
MiB = 1024**2
TOLERANCE = 2 * MiB


def _bench():
    spec = importlib.util.spec_from_file_location("gpu_prewarm", ROOT / "benchmarks/gpu_prewarm.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def scenarios(cuda_device, tmp_path_factory) -> dict[str, dict]:
    bench = _bench()
    extra = ["--margin-mib", "512", "--weights-gib", "85"]
    return {s: bench.run_child(s, tmp_path_factory.mktemp(f"cache{s}"), extra) for s in ("A", "B")}


def test_a_unplanned_first_request_breaks_the_margin(scenarios):
    a = scenarios["A"]
    assert a["kv_allocated"] == a["kv_planned"] > 0
    below_margin = 0 <= a["request_min_free"] < a["margin"]
    assert a["oom"] or below_margin, a
    assert a["late_compiles"] > 0, "the watchdog saw no compile in the first request"


def test_b_prewarmed_request_keeps_the_margin(scenarios):
    b = scenarios["B"]
    assert b["error"] == "", b["error"]
    assert b["late_compiles"] == 0, b["late_kernels"]
    assert b["prewarm_compiles"] >= 10  # nine gather specializations and the fill
    assert b["kv_allocated"] == b["kv_planned"] > 0
    assert b["request_min_free"] >= b["margin"]
    assert b["free_after_request"] >= b["margin"]


def test_b_measurement_matches_cudamemgetinfo(scenarios):
    b = scenarios["B"]
    m = b["prewarm"]
    assert abs(m["retained_bytes"] - b["direct_retained"]) <= TOLERANCE
    assert abs(m["transient_peak_bytes"] - b["direct_transient"]) <= TOLERANCE
    # The local-memory growth is physical: retained, yet invisible to torch.
    assert m["retained_bytes"] > 1024 * MiB
    assert m["torch_reserved_delta"] < 64 * MiB
    assert b["headroom"] >= m["transient_peak_bytes"] - m["retained_bytes"]


def test_b_plans_less_kv_than_a_by_the_measured_cost(scenarios):
    a, b = scenarios["A"], scenarios["B"]
    cost = b["prewarm"]["retained_bytes"] + b["headroom"]
    assert abs((a["kv_planned"] - b["kv_planned"]) - cost) <= 64 * MiB
