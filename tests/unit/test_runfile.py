"""The run directory's files as the contract types them: the run file (plan.json, version 3)
written and read back, a foreign or broken one refused by name, the rank record (version 2),
and what the current main wrote before them (run files of version 2, records and qualified
records of version 1: ``old_versions/``, and two real H200 records: ``records/``) read through
the readers for older versions."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from launcher import pipeline
from launcher.cli import cli
from launcher.contract import census, runfile, store
from launcher.contract.base import ContractError
from launcher.contract.names import MEASURABLE, ComponentName, HeadroomPart, Source
from launcher.contract.record import RECORD_SCHEMA, RankRecord, read_record
from launcher.plan.calibration import load_measured, save_record, store_dir
from launcher.plan.measured import Measured
from launcher.profile import load_profile
from launcher.runtime.worker.runplan import RunPlan
from tests.conftest import MINIMAL, PROFILES

HERE = Path(__file__).parent
RECORDS = sorted((HERE / "records").glob("*.json"))
"""measure-rank0.json of GPU-tier boots on the H200 (a dense and a GLM-architecture model),
as the worker wrote them (version 1)."""
OLD = HERE / "old_versions"
"""Files the current main wrote before the contract (``git log`` on the folder says how)."""
OLD_RUN_FILES = sorted(OLD.glob("plan-v2-*.json"))
OLD_RECORDS = sorted(OLD.glob("measure-rank0-v1-*.json"))
MiB = 2**20


def written(tmp_path, *sets: str) -> Path:
    base = (f"runtime.cache_root={tmp_path / 'cache'}", "prewarm.providers=[]", *sets)
    planned = pipeline.make_plan(pipeline.load(str(PROFILES / "tiny-cpu.yaml"), base))
    pipeline.write_command(planned, run_dir=str(tmp_path / "run"))
    return tmp_path / "run" / runfile.PLAN_FILE


def test_the_run_file_is_written_whole_and_reads_back_to_the_same_values(tmp_path):
    path = written(tmp_path)
    data = json.loads(path.read_text())
    run = runfile.read_run_file(path)
    assert data["run_file"] == runfile.RUN_FILE_VERSION == 3
    assert run.to_json() == data
    assert run.cards == runfile.Cards()  # --print-command read no cards
    assert run.ranks[0].kv_cache.bytes == run.ranks[0].bytes(ComponentName.KV_CACHE) > 0
    assert run.plan.fingerprint == run.fingerprint and run.plan.vllm is not None
    assert not list(path.parent.glob(".plan.json.*"))  # no temporary left beside it


@pytest.mark.parametrize(
    "text, says",
    [
        ("{half", "unreadable run file"),
        ("[1, 2]", "not a JSON object"),
        (json.dumps({"run_file": 1, "ranks": [], "kv": {}}), "version 1"),
        (json.dumps({"schema": "b12x-launch/measurement/1", "rank": 0}), "version None"),
        (json.dumps({"run_file": 3, "ranks": [], "kv": {}}), "malformed ranks: List should"),
    ],
)
def test_a_broken_or_foreign_run_file_is_refused_by_name(tmp_path, text, says):
    path = tmp_path / "run" / "plan.json"
    path.parent.mkdir()
    path.write_text(text)
    with pytest.raises(ContractError, match=says) as err:
        runfile.read_run_file(path)
    assert str(path) in str(err.value)


def test_a_run_file_with_a_key_no_launcher_writes_is_refused_naming_the_key(tmp_path):
    path = written(tmp_path)
    data = json.loads(path.read_text())
    data["ranks"][0]["components"]["jit_headroom"]["source"] = "guessed"
    data["cards"]["colour"] = "red"
    path.write_text(json.dumps(data))
    with pytest.raises(ContractError) as err:
        runfile.read_run_file(path)
    assert "ranks.0.components.jit_headroom.source" in str(err.value)
    assert "cards.colour: Extra inputs are not permitted" in str(err.value)


def test_a_broken_or_foreign_record_is_refused_by_name(tmp_path):
    cases = {
        "a.json": "{half",
        "b.json": json.dumps({"schema": "other", "rank": 0, "measured": {}}),
        "c.json": json.dumps({"schema": RECORD_SCHEMA, "rank": 0, "measured": {"x": -1}}),
        "d.json": json.dumps(
            {"schema": RECORD_SCHEMA, "fingerprint": "f", "rank": 0, "when": "?",
             "measured": {"weights": True}}
        ),
    }  # fmt: skip
    for name, text in cases.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(ContractError, match=name):
            read_record(tmp_path / name)


@pytest.mark.parametrize("path", RECORDS + OLD_RECORDS, ids=lambda p: p.stem)
def test_a_version_1_record_reads_with_every_figure_and_round_trips_as_version_2(path, tmp_path):
    raw = json.loads(path.read_text())
    record = read_record(path)
    assert record.measured == raw["measured"] and record.plan == raw["plan"]
    assert record.budget.bytes == raw["budget"]["bytes"]
    assert record.budget.reserved == {
        k: v for k, v in raw["budget"].items() if k not in ("bytes", "basis", "measured_room")
    }
    env = raw["environment"]
    own = ("gpu_kind", "host", "gpu", "cuda", "driver")
    assert record.environment.packages == {k: v for k, v in env.items() if k not in own}
    assert record.environment.gpu_kind == env["gpu_kind"]
    assert record.environment.driver == env.get("driver")
    assert [p.provider for p in record.prewarm] == [p["provider"] for p in raw["prewarm"]]
    assert len(record.enumeration()) == sum(len(p["enumeration"]) for p in raw["prewarm"])
    assert record.kv is not None and record.kv.blocks == raw["kv"]["blocks"]
    # as version 2: the same values, read back by the version 2 reader
    again = tmp_path / "again.json"
    again.write_text(json.dumps(record.to_json()))
    assert json.loads(again.read_text())["schema"] == RECORD_SCHEMA
    assert read_record(again) == record


def test_every_part_a_worker_of_version_1_wrote_is_read(tmp_path):
    record = read_record(OLD / "measure-rank0-v1-every-part.json")
    vllm, keys = record.prewarm
    assert vllm.scratch is not None and vllm.scratch.restored is not None
    assert vllm.scratch.restored.rewritten == ["runner.input_batch.token_ids_cpu_tensor"]
    assert [(e.name, e.status) for e in vllm.entry_points] == [
        ("serving_batches", "called"),
        ("b12x_warmup", "missing"),
    ]
    assert keys.held[0].qualname == "_compute_slot_mapping_kernel" and record.held()
    assert record.enumeration()[0].as_launched == ["max_decode_len=4"]
    assert [e.kind for e in record.late_compiles] == ["triton", "inductor", "b12x"]
    assert census.reserve(record.late_compiles) == 64 * MiB  # the triton one is replayed
    assert record.late_files == ["triton/ABCD/mask_kernel.cubin"]
    assert ComponentName.CUDAGRAPH_POOL in record.measured_why
    assert record.activation is not None and record.free_after_warmup == 2782003200


def test_a_text_entry_of_an_older_worker_is_shown_and_never_planned():
    data = json.loads((OLD / "measure-rank0-v1-tiny-cpu.json").read_text())
    data["late_compiles"] = ["triton _dcp_gather[DCP=4]"]
    from launcher.contract import record_v1

    record = RankRecord.model_validate(record_v1.upgrade(data, "x.json"))
    assert [e.describe() for e in record.late_compiles] == ["triton _dcp_gather[DCP=4] (recorded)"]
    assert census.merge(record.late_compiles) == []


def _old_load(data: dict) -> Measured:
    """calibration.load_measured's reading of one record before the record was typed."""
    figures = {k: v for k, v in data["measured"].items() if k in MEASURABLE}
    late = census.entries(data.get("late_compiles"))
    learned = census.merge(census.entries(data.get("learned")), late)
    return Measured(figures, str(data.get("when", "?"))[:10], tuple(learned))


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.stem)
def test_calibration_reads_a_version_1_record_as_before_and_as_version_2(path, tmp_path, write):
    raw = json.loads(path.read_text())
    env = raw["environment"]
    sets = ["hardware.gpu=h200", f"runtime.cache_root={tmp_path / 'cache'}"]
    profile = load_profile(write("p.yaml", MINIMAL), sets).profile
    versions = {k: env.get(k) for k in ("torch", "vllm", "b12x", "triton")}

    # the file as an earlier worker left it in the store (under its plan's fingerprint) ...
    store_path = store_dir(profile, raw["fingerprint"])
    store_path.mkdir(parents=True)
    (store_path / "rank0.json").write_text(path.read_text())
    old = load_measured(profile, raw["fingerprint"], versions=versions, driver=env.get("driver"))
    # ... and the same record saved by today's worker (typed, as version 2)
    written_to = save_record(read_record(path), tmp_path / "run", profile)
    assert [json.loads(p.read_text())["schema"] for p in written_to] == [RECORD_SCHEMA] * 2
    new = load_measured(profile, raw["fingerprint"], versions=versions, driver=env["driver"])
    assert old == new == {0: _old_load(raw)}
    assert new[0].components and new[0].when == raw["when"][:10]


@pytest.mark.parametrize("path", OLD_RUN_FILES, ids=lambda p: p.stem)
def test_a_version_2_run_file_reads_and_the_worker_takes_it(path, tmp_path):
    raw = json.loads(path.read_text())
    run = runfile.read_run_file(path)
    assert raw["run_file"] == 2 and run.run_file == 3
    assert run.fingerprint == raw["fingerprint"] and run.kv.tokens == raw["kv"]["tokens"]
    for rank, old in zip(run.ranks, raw["ranks"], strict=True):
        assert {n: c.bytes for n, c in rank.components.items()} == {
            n: c["bytes"] for n, c in old["components"].items()
        }
    assert run.cards.driver == raw.get("driver") and run.cards.gpu_kind == raw.get("gpu_kind")
    plan = tmp_path / "plan.json"
    shutil.copy(path, plan)
    worker = RunPlan.from_env({"BLAUNCH_PLAN": str(plan), "BLAUNCH_FINGERPRINT": run.fingerprint})
    assert worker.deployment.block_size == raw["deployment"]["block_size"]
    assert worker.facts.num_layers == raw["model_facts"]["num_layers"]


def test_a_calibrated_version_2_headroom_is_read_as_its_parts():
    """Version 2 summed the measurement and the census's reserve into one figure (the
    reserve named only in the detail); the reader gives it back its two parts."""
    run = runfile.read_run_file(OLD / "plan-v2-glm52-calibrated.json")
    headroom = run.ranks[0].jit_headroom
    assert (headroom.bytes, headroom.prewarm, headroom.late_compiles) == (
        500 * MiB,
        300 * MiB,
        200 * MiB,
    )
    component = run.ranks[0].components[ComponentName.JIT_HEADROOM]
    assert set(component.parts) == {HeadroomPart.PREWARM, HeadroomPart.LATE_COMPILES}
    assert run.artifact is not None and run.artifact.warm and run.artifact.keys is not None


def test_a_qualified_pin_of_version_2_is_source_qualified_with_its_date():
    run = runfile.read_run_file(OLD / "plan-v2-tiny-cpu-qualified.json")
    kv = run.ranks[0].kv_cache
    assert (kv.source, kv.detail) == (Source.QUALIFIED, "qualified 2026-12-02")
    assert run.kv.pinned == "qualified"


def test_a_version_1_qualified_record_reads_into_the_store(tmp_path):
    record = store.read_qualified(OLD / "qualified-v1-tiny-cpu.json", pytest.fail)
    assert record is not None and record.kv.blocks == 3305
    assert record.environment.gpu_kind == "cpu" and record.environment.packages["vllm"]
    assert record.verify is not None and record.verify.passed
    assert record.qualify_boot is not None and record.qualify_boot.kv_blocks == {0: 3305}


def test_report_reads_a_run_directory_the_current_main_wrote(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(OLD / "plan-v2-glm52-calibrated.json", run / "plan.json")
    # the record of this plan (report leaves out another plan's record: issue 64)
    record = json.loads((OLD / "measure-rank0-v1-every-part.json").read_text())
    record["fingerprint"] = json.loads((run / "plan.json").read_text())["fingerprint"]
    (run / "measure-rank0.json").write_text(json.dumps(record))
    out = CliRunner().invoke(cli, ["report", str(run)])
    assert out.exit_code == 0, out.output
    assert "late: inductor triton_poi_fused_0" in out.output
    assert "cache artifact 0123456789abcdef" in out.output and "covers this boot: yes" in out.output


def test_a_record_before_the_kv_cache_has_no_kv():
    early = RankRecord(fingerprint="f", rank=0, when="?")
    assert early.to_json()["kv"] is None  # a reader tells "not yet" by it
