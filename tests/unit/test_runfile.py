"""The run directory's files: plan.json written and read back typed, a foreign or broken one
refused by name, and the workers' records (real ones from H200 boots as fixtures) read by
calibration exactly as before they were typed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from launcher import runfile
from launcher.plan import census
from launcher.plan.calibration import load_measured, save_record, store_dir
from launcher.plan.measured import MEASURABLE, Measured
from launcher.profile import load_profile
from launcher.runfile import RankRecord, RunFileError
from tests.conftest import MINIMAL

RECORDS = sorted((Path(__file__).parent / "records").glob("*.json"))
"""measure-rank0.json of GPU-tier boots on the H200 (a dense and a GLM-architecture model),
as the worker wrote them before its record was a dataclass."""

PARTS = {
    "profile_data": {"name": "p"},
    "deployment": {"runtime": "vllm-0.26"},
    "model_facts": {"layers": 2},
}


def test_the_run_file_round_trips(tmp_path):
    plan = {"fingerprint": "abc", "ranks": [{"rank": 0}], "kv": {"tokens": 9}}
    path = runfile.write_run_file(tmp_path / runfile.PLAN_FILE, plan, **PARTS, driver="580.1")
    read = runfile.read_run_file(path)
    assert (read.fingerprint, read.ranks, read.kv, read.driver) == (
        "abc",
        [{"rank": 0}],
        {"tokens": 9},
        "580.1",
    )
    assert (read.profile_data, read.deployment, read.model_facts) == tuple(PARTS.values())
    assert read.data["run_file"] == runfile.RUN_FILE_VERSION
    no_driver = runfile.write_run_file(tmp_path / "cpu.json", plan, **PARTS)
    assert runfile.read_run_file(no_driver).driver is None


@pytest.mark.parametrize(
    "text, says",
    [
        ("{half", "unreadable run file"),
        ("[1, 2]", "not a JSON object"),
        (json.dumps({"run_file": 1, "ranks": [], "kv": {}, **PARTS}), "version 1"),
        (json.dumps({"schema": "b12x-launch/measurement/1", "rank": 0}), "version None"),
        (
            json.dumps({"run_file": runfile.RUN_FILE_VERSION, "ranks": [], "kv": {}}),
            "no profile_data",
        ),
    ],
)
def test_a_broken_or_foreign_run_file_is_refused_by_name(tmp_path, text, says):
    path = tmp_path / "run" / "plan.json"
    path.parent.mkdir()
    path.write_text(text)
    with pytest.raises(RunFileError, match=says) as err:
        runfile.read_run_file(path)
    assert str(path) in str(err.value)


def test_a_broken_or_foreign_record_is_refused_by_name(tmp_path):
    cases = {
        "a.json": "{half",
        "b.json": json.dumps({"schema": "other", "rank": 0, "measured": {}}),
        "c.json": json.dumps({"schema": runfile.RECORD_SCHEMA, "rank": 0, "measured": {"x": -1}}),
    }
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(RunFileError, match=name):
            runfile.read_record(tmp_path / name)


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.stem)
def test_a_real_record_reads_back_to_the_same_json(path):
    raw = json.loads(path.read_text())
    record = runfile.read_record(path)
    assert record.kv is not None and record.budget.bytes == raw["budget"]["bytes"]
    assert record.to_dict() == raw
    assert list(record.to_dict()) == list(raw)  # the same keys, in the same order


def test_a_record_before_the_kv_cache_has_no_kv_keys():
    raw = json.loads(RECORDS[0].read_text())
    early = {k: v for k, v in raw.items() if k not in ("kv", "free_after_warmup", "activation")}
    assert RankRecord.from_dict(early).to_dict() == early  # a reader tells "not yet" by it


def _old_load(data: dict) -> Measured:
    """calibration.load_measured's reading of one record before the record was typed."""
    figures = {k: v for k, v in data["measured"].items() if k in MEASURABLE}
    learned = census.merge(data.get("learned") or [], data.get("late_compiles") or [])
    return Measured(figures, str(data.get("when", "?"))[:10], tuple(learned))


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.stem)
def test_calibration_reads_the_workers_typed_record_as_before(path, tmp_path, write):
    raw = json.loads(path.read_text())
    env = raw["environment"]
    sets = ["hardware.gpu=h200", f"runtime.cache_root={tmp_path / 'cache'}"]
    profile = load_profile(write("p.yaml", MINIMAL), sets).profile
    versions = {k: env.get(k) for k in ("torch", "vllm", "b12x", "triton")}

    # the file as an earlier worker left it in the store (under its plan's fingerprint) ...
    store = store_dir(profile, raw["fingerprint"])
    store.mkdir(parents=True)
    (store / "rank0.json").write_text(path.read_text())
    old = load_measured(profile, raw["fingerprint"], versions=versions, driver=env.get("driver"))
    # ... and the same record saved by today's worker (typed, through save_record)
    written = save_record(RankRecord.from_dict(raw), tmp_path / "run", profile)
    assert [json.loads(p.read_text()) for p in written] == [raw, raw]
    new = load_measured(profile, raw["fingerprint"], versions=versions, driver=env["driver"])
    assert old == new == {0: _old_load(raw)}
    assert new[0].components and new[0].when == raw["when"][:10]
