"""Calibration round trip: a worker's record makes the next plan say `measured`."""

import json
from dataclasses import replace

from launcher.plan.calibration import SCHEMA, load_measured, save_record
from launcher.plan.fingerprint import profile_fingerprint
from launcher.plan.planner import plan
from launcher.profile import load_profile
from launcher.units import MiB
from tests.conftest import MINIMAL, gathered


def setup(write, tmp_path):
    loaded = load_profile(write("p.yaml", MINIMAL), [f"runtime.cache_root={tmp_path / 'cache'}"])
    return loaded, profile_fingerprint(loaded.profile)


def record(fp, rank, **measured):
    return {
        "fingerprint": fp,
        "rank": rank,
        "when": "2026-11-30T10:00:00",
        "environment": {"gpu_kind": "rtx-pro-6000", "vllm": "0.33.0"},
        "measured": measured,
    }


def test_round_trip_labels_measured_numbers(write, tmp_path):
    loaded, fp = setup(write, tmp_path)
    for r in range(4):
        save_record(
            record(fp, r, jit_headroom=300 * MiB, workspaces=700 * MiB),
            tmp_path / "run",
            loaded.profile,
        )
    assert (tmp_path / "run" / "measure-rank3.json").exists()
    measured = load_measured(loaded.profile, fp, versions={"vllm": "0.33.0"})
    assert sorted(measured) == [0, 1, 2, 3]
    p = plan(loaded.profile, replace(gathered(loaded), measured=measured))
    c = p.ranks[1].component("jit_headroom")
    assert (c.bytes, c.source, c.detail) == (300 * MiB, "measured", "measured 2026-11-30")
    assert json.loads((tmp_path / "run" / "measure-rank0.json").read_text())["schema"] == SCHEMA


def test_corrupt_and_foreign_records_are_ignored_with_a_warning(write, tmp_path):
    loaded, fp = setup(write, tmp_path)
    save_record(record(fp, 0, jit_headroom=1), None, loaded.profile)
    folder = tmp_path / "cache" / "calibration" / fp
    (folder / "rank1.json").write_text("{not json")
    (folder / "rank2.json").write_text(json.dumps({"schema": "other", "rank": 2}))
    (folder / "rank3.json").write_text(
        json.dumps({**record(fp, 3), "schema": SCHEMA, "measured": {"jit_headroom": -5}})
    )
    warnings = []
    measured = load_measured(loaded.profile, fp, warn=warnings.append, versions={})
    assert list(measured) == [0]
    assert len(warnings) == 3 and any("unreadable" in w for w in warnings)


def test_records_from_another_stack_are_stale(write, tmp_path):
    loaded, fp = setup(write, tmp_path)
    save_record(record(fp, 0, jit_headroom=1), None, loaded.profile)
    warnings = []
    assert (
        load_measured(loaded.profile, fp, warn=warnings.append, versions={"vllm": "0.34.0"}) == {}
    )
    assert "other versions of vllm" in warnings[0]


def test_fingerprint_ignores_labels_but_not_memory(write, tmp_path):
    _, fp = setup(write, tmp_path)
    renamed = load_profile(
        write("q.yaml", MINIMAL), ["name=x", "serving.port=9000", f"runtime.cache_root={tmp_path}"]
    )
    assert profile_fingerprint(renamed.profile) == fp
    longer = load_profile(write("r.yaml", MINIMAL), ["serving.max_num_seqs=4"])
    assert profile_fingerprint(longer.profile) != fp
    secret = load_profile(write("s.yaml", MINIMAL + "env:\n  HF_TOKEN: abc\n"))
    assert profile_fingerprint(secret.profile) == profile_fingerprint(
        load_profile(write("t.yaml", MINIMAL + "env:\n  HF_TOKEN: xyz\n")).profile
    )


def test_records_from_another_driver_are_stale(write, tmp_path):
    loaded, fp = setup(write, tmp_path)
    rec = record(fp, 0, jit_headroom=1)
    rec["environment"]["driver"] = "580.159.04"
    save_record(rec, None, loaded.profile)
    warnings = []
    assert (
        load_measured(loaded.profile, fp, warn=warnings.append, versions={"driver": "590.1"}) == {}
    )
    assert "other versions of driver" in warnings[0]
    assert load_measured(loaded.profile, fp, versions={"driver": "580.159.04"})


def test_fingerprint_ignores_memory_other_processes_hold(write, tmp_path):
    _, fp = setup(write, tmp_path)
    busy = load_profile(
        write("b.yaml", MINIMAL),
        ["hardware.reserved_by_others=3GiB", f"runtime.cache_root={tmp_path / 'cache'}"],
    )
    assert profile_fingerprint(busy.profile) == fp


def test_how_a_figure_was_made_reaches_the_next_plans_detail(write, tmp_path):
    loaded, fp = setup(write, tmp_path)
    r = record(fp, 0, cudagraph_pool=178 * MiB)
    r["measured_why"] = {"cudagraph_pool": "graphs 100 MiB + 78 MiB beside the KV cache"}
    save_record(r, tmp_path / "run", loaded.profile)
    measured = load_measured(loaded.profile, fp, versions={"vllm": "0.33.0"})
    p = plan(loaded.profile, replace(gathered(loaded), measured=measured))
    c = p.ranks[0].component("cudagraph_pool")
    assert (c.bytes, c.source) == (178 * MiB, "measured")
    assert c.detail == "measured 2026-11-30: graphs 100 MiB + 78 MiB beside the KV cache"


def test_records_from_another_cutlass_dsl_flashinfer_or_exllamav3_are_stale(write, tmp_path):
    """b12x's kernels are CuTe DSL programs and EXL3 weights go through exllamav3: a new
    version of either changes what the kernels hold, as a new vLLM or torch does."""
    from launcher.plan.calibration import stack_versions

    loaded, fp = setup(write, tmp_path)
    rec = record(fp, 0, jit_headroom=1)
    old = {"nvidia-cutlass-dsl": "4.3.0", "flashinfer-python": "0.5.2", "exllamav3": "0.0.18"}
    rec["environment"].update(old)
    save_record(rec, None, loaded.profile)
    assert set(old) <= set(stack_versions())  # what the worker records
    for name in old:
        warnings = []
        newer = {name: "9.9.9"}
        assert load_measured(loaded.profile, fp, warn=warnings.append, versions=newer) == {}
        assert f"other versions of {name}" in warnings[0]
    assert load_measured(loaded.profile, fp, versions=old)
