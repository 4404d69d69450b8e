"""A qualified record makes the next plan pin its KV cache (source `qualified`, its date in
the detail)."""

import json

import pytest
from click.testing import CliRunner

from launcher import pipeline
from launcher.cli import cli
from launcher.plan.fingerprint import profile_fingerprint
from launcher.plan.qualified import SCHEMA, load_qualified, save_qualified
from launcher.runtime.budget import BudgetError, BudgetInputs, kv_budget
from launcher.runtime.worker.planned import PlannedMixin
from launcher.units import GiB, MiB
from tests.conftest import MINIMAL, PROFILES
from tests.unit.test_worker import FakeCPUWorker


def record(blocks, **env):
    return {
        "when": "2026-11-30T18:00:00",
        "environment": {"gpu_kind": "rtx-pro-6000", **env},
        "kv": {"blocks": blocks, "tokens": blocks * 256},
    }


@pytest.fixture
def profile(write, tmp_path):
    path = write("p.yaml", MINIMAL)
    sets = (f"runtime.cache_root={tmp_path / 'cache'}",)
    loaded = pipeline.load(str(path), sets)
    return path, sets, loaded, profile_fingerprint(loaded.profile)


def test_round_trip_in_the_run_directory_and_the_store(profile, tmp_path):
    _, _, loaded, fp = profile
    paths = save_qualified(record(1234, vllm="0.33.0"), tmp_path / "run", loaded.profile, fp)
    assert [p.name for p in paths] == ["qualified.json", "qualified.json"]
    data = json.loads((tmp_path / "run" / "qualified.json").read_text())
    assert (data["schema"], data["fingerprint"]) == (SCHEMA, fp)
    q = load_qualified(loaded.profile, fp, versions={"vllm": "0.33.0"})
    assert (q.blocks, q.when) == (1234, "2026-11-30")


def test_stale_foreign_and_corrupt_records_are_ignored(profile, tmp_path):
    _, _, loaded, fp = profile
    save_qualified(record(1234, vllm="0.33.0"), None, loaded.profile, fp)
    warnings = []
    assert load_qualified(loaded.profile, fp, warnings.append, versions={"vllm": "0.34.0"}) is None
    assert "other versions of vllm" in warnings[-1]
    store = tmp_path / "cache" / "calibration" / fp / "qualified.json"
    # save_qualified keeps another kind's record out of the store; one left by an older
    # launcher is still there to be refused when read.
    foreign = record(1234, gpu_kind="h200")
    store.write_text(json.dumps({"schema": SCHEMA, "fingerprint": fp, **foreign}))
    assert load_qualified(loaded.profile, fp, warnings.append, versions={}) is None
    for text in ("{oops", json.dumps({"schema": SCHEMA, "kv": {"blocks": -3}})):
        store.write_text(text)
        assert load_qualified(loaded.profile, fp, warnings.append, versions={}) is None
    assert "unreadable" in warnings[-2] and "malformed" in warnings[-1]


def test_the_next_plan_pins_the_qualified_blocks(profile):
    path, sets, loaded, fp = profile
    free = pipeline.make_plan(loaded).plan.kv.blocks_per_rank
    save_qualified(record(free + 500), None, loaded.profile, fp)
    out = CliRunner().invoke(cli, [str(path), "--json", *(a for s in sets for a in ("--set", s))])
    data = json.loads(out.output)
    assert out.exit_code == 0 and data["fits"], out.output
    assert data["kv"]["pinned"] == "qualified"
    assert data["kv"]["blocks_per_rank"] == free + 500
    kv = data["ranks"][0]["components"]["kv_cache"]
    # the source an enum, the date in the detail (docs/changelog.md, run file 3)
    assert (kv["source"], kv["detail"]) == ("qualified", "qualified 2026-11-30")
    assert kv["bytes"] == (free + 500) * data["kv"]["page_bytes_per_rank"]
    assert any("qualified" in n and "500 more" in n for n in data["notes"])
    argv = data["vllm"]["argv"]
    assert int(argv[argv.index("--kv-cache-memory-bytes") + 1]) == kv["bytes"]


def test_the_table_says_where_the_pin_came_from(profile):
    path, sets, loaded, fp = profile
    save_qualified(record(100), None, loaded.profile, fp)
    out = CliRunner().invoke(
        cli, [str(path), "--dry-run", *(a for s in sets for a in ("--set", s))]
    )
    assert "qualified 2026-11-30" in out.output
    assert "pinned by b12x-launch qualify" in out.output


def test_a_pin_in_the_profile_or_no_calibration_wins(profile, tmp_path):
    path, sets, loaded, fp = profile
    save_qualified(record(100), None, loaded.profile, fp)
    assert pipeline.make_plan(loaded, calibrate=False).plan.kv.pinned is None
    assert pipeline.make_plan(loaded, use_qualified=False).plan.kv.pinned is None
    pinned = pipeline.load(str(path), (*sets, "memory.kv_tokens=100000"))
    store = tmp_path / "cache" / "calibration" / profile_fingerprint(pinned.profile)
    save_qualified(record(100), None, pinned.profile, profile_fingerprint(pinned.profile))
    assert store.is_dir()
    assert pipeline.make_plan(pinned).plan.kv.pinned == "kv_tokens"


def test_the_workload_does_not_change_the_fingerprint(profile):
    path, sets, _, fp = profile
    other = pipeline.load(str(path), (*sets, "qualify.requests=3", "qualify.max_seconds=10"))
    assert profile_fingerprint(other.profile) == fp


class Worker(PlannedMixin, FakeCPUWorker):
    platform = "cpu"


def test_a_qualified_cpu_run_gets_exactly_the_pinned_size(tmp_path, monkeypatch):
    """On CPU the launcher passes the KV plus the reserves, which the worker subtracts."""
    sets = (f"runtime.cache_root={tmp_path / 'cache'}", "prewarm.providers=[]")
    loaded = pipeline.load(str(PROFILES / "tiny-cpu.yaml"), sets)
    base = pipeline.make_plan(loaded)
    fp = base.fingerprint
    save_qualified(
        record(base.plan.kv.blocks_per_rank - 7, gpu_kind="cpu"), None, loaded.profile, fp
    )
    planned = pipeline.make_plan(loaded)
    assert planned.plan.kv.pinned == "qualified"
    prepared = pipeline.prepare(
        planned, force=False, run_dir=str(tmp_path / "run"), check_vllm=False
    )
    for key in ("BLAUNCH_PLAN", "BLAUNCH_RUN_DIR", "BLAUNCH_FINGERPRINT"):
        monkeypatch.setenv(key, prepared.env[key])
    passed = int(prepared.argv[prepared.argv.index("--kv-cache-memory-bytes") + 1])
    got = Worker(available=passed).determine_available_memory()
    assert (
        got
        == planned.plan.ranks[0].kv_bytes
        == (base.plan.kv.blocks_per_rank - 7) * (planned.plan.kv.layout.page_bytes)
    )


def gpu(**kw):
    base = dict(
        platform="cuda",
        vllm_available=6 * GiB,
        jit_headroom=1 * GiB,
        safety_margin=512 * MiB,
        planned_kv=5 * GiB,
        free_after_profile=8 * GiB,
        peak_activation=600 * MiB,
        cudagraph=200 * MiB,
    )
    return BudgetInputs(**{**base, **kw})


def test_a_gpu_pin_may_use_the_reserves_qualify_proved_unneeded():
    pinned = 8 * GiB - 512 * MiB
    assert kv_budget(gpu(pinned_kv=pinned)).bytes == pinned
    with pytest.raises(BudgetError, match="no longer fits"):
        kv_budget(gpu(pinned_kv=pinned + 1))
