"""The GPU tier's calibrated-blocks rule replayed on the H100's raw runs (2026-12-06, vLLM
0.26): vLLM's blocks are the plan's, or the room the worker measured where what vLLM held at
its profile grew since the calibrating boot, and never short by more than that growth. The
rule is ``tests/gpu/test_real_vllm.py``'s own (``grown_since_calibration``); no GPU."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.gpu.test_real_vllm import grown_since_calibration

RUNS = Path(__file__).resolve().parents[2] / "docs" / "gpu-runs"
BOOT2 = "2026-12-06-h100-moe-and-glm-users-calibrated-logprob-keys"
FRESH = "2026-12-06-h100-moe-fresh-node-bar-mtimes-kept-samples"
CALIBRATED = [
    (BOOT2, "moe-users-calibrated"),
    (BOOT2, "glm-users-calibrated"),
    ("2026-12-06-h100-moe-canary-logprob-keys", "moe-canary"),
    ("2026-12-06-h100-moe-fresh-node-bar-mtimes-kept-cold-and-bake", "moe-art-baked-2"),
    (FRESH, "moe-art-fresh"),
    (FRESH, "moe-art-fresh-2"),
    (FRESH, "moe-art-fresh-3"),
]


def _boot(run: str, boot: str) -> tuple[dict, dict]:
    plan = json.loads((RUNS / run / f"{boot}.plan.json").read_text())
    record = json.loads((RUNS / run / f"{boot}.measure-rank0.json").read_text())
    return plan, record


def _short_and_allowed(plan: dict, record: dict) -> tuple[int, int]:
    """Blocks the allocation fell short of the plan, and blocks the rule allows."""
    page = plan["kv"]["page_bytes_per_rank"]
    short = plan["kv"]["blocks_per_rank"] - record["kv"]["blocks"]
    return short, -(-grown_since_calibration(plan, 0, record) // page)


@pytest.mark.parametrize("run,boot", CALIBRATED, ids=[b for _, b in CALIBRATED])
def test_each_calibrated_boot_is_to_the_block_or_short_only_by_what_grew(run, boot):
    plan, record = _boot(run, boot)
    room = record["budget"]["measured_room"] // plan["kv"]["page_bytes_per_rank"]
    assert record["kv"]["blocks"] == min(plan["kv"]["blocks_per_rank"], room)
    short, allowed = _short_and_allowed(plan, record)
    assert 0 <= short <= allowed


def test_the_moe_boot_one_block_short_is_the_64_kib_its_workspaces_grew():
    plan, record = _boot(BOOT2, "moe-users-calibrated")
    assert grown_since_calibration(plan, 0, record) == 64 << 10
    assert _short_and_allowed(plan, record) == (1, 1)


def test_a_shortfall_with_nothing_grown_is_not_allowed():
    plan, record = _boot(BOOT2, "moe-users-calibrated")
    record = {**record, "measured": {**record["measured"], "workspaces": 0}}
    short, allowed = _short_and_allowed(plan, record)
    assert short == 1 and allowed == 0
