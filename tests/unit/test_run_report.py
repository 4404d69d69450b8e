"""``b12x-launch report RUN_DIR`` on a run directory laid out as the launcher writes it."""

import json
import os

import pytest
from click.testing import CliRunner

from launcher.cli import cli
from launcher.contract import census
from launcher.contract.record import RECORD_SCHEMA, RECORD_SCHEMA_V1
from launcher.plan.calibration import save_record
from launcher.profile import load_profile
from tests.conftest import MINIMAL


def make_run(tmp_path, write):
    run = tmp_path / "run"
    out = CliRunner().invoke(cli, [str(write("p.yaml", MINIMAL)), "--json"])
    plan = json.loads(out.output)
    run.mkdir()
    (run / "plan.json").write_text(json.dumps(plan))
    profile = load_profile(write("p.yaml", MINIMAL), [f"runtime.cache_root={tmp_path}"]).profile
    kv = plan["ranks"][0]["components"]["kv_cache"]["bytes"]
    for rank in range(4):
        save_record(
            {
                "fingerprint": plan["fingerprint"],
                "rank": rank,
                "when": "2026-11-30",
                "measured": {"jit_headroom": 123 * 2**20},
                "budget": {"bytes": kv},
                "kv": {
                    "blocks": plan["kv"]["blocks_per_rank"],
                    "tokens": plan["kv"]["tokens"],
                    "planned_tokens": plan["kv"]["tokens"],
                },
                "late_compiles": ["triton _dcp_gather[DCP=4]"] if rank == 2 else [],
            },
            run,
            profile,
        )
    return run, plan


def test_report_shows_plan_and_measurements(tmp_path, write):
    run, plan = make_run(tmp_path, write)
    (run / "vllm.log").write_text(
        f"GPU KV cache size: {plan['kv']['tokens']:,} tokens, Maximum "
        "concurrency for 131,072 tokens per request: 4.5x\n"
    )
    out = CliRunner().invoke(cli, ["report", str(run)])
    assert out.exit_code == 0, out.output
    assert "RANK 3 (GiB)" in out.output and "0.12" in out.output  # 123 MiB measured headroom
    assert "rank 2: KV" in out.output and "1 late compile(s)" in out.output
    assert "late: triton _dcp_gather[DCP=4] (recorded)" in out.output
    assert f"vLLM logged {plan['kv']['tokens']:,} KV tokens" in out.output


def test_report_on_a_directory_that_is_not_a_run(tmp_path):
    out = CliRunner().invoke(cli, ["report", str(tmp_path)])
    assert out.exit_code == 1 and "a b12x-launch run?" in out.output
    assert "Traceback" not in out.output


@pytest.mark.parametrize(
    "plan, says",
    [
        ([1, 2], "not a JSON object"),
        ({"fingerprint": "abc"}, "no ranks"),
        ({"ranks": [{"rank": 0, "total_bytes": 1}], "kv": {}}, "a rank without"),
        ({"ranks": [{"rank": 0, "total_bytes": 1, "components": {"w": 1}}]}, "a component"),
        ({"ranks": [{"rank": 0, "total_bytes": 1, "components": {}}], "kv": []}, "no kv"),
    ],
)
def test_report_on_a_json_file_that_is_not_a_plan_names_it_without_a_crash(tmp_path, plan, says):
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    for args in ([], ["--plot", str(tmp_path / "run.svg")]):
        out = CliRunner().invoke(cli, ["report", str(tmp_path), *args])
        assert out.exit_code == 1, out.output
        assert f"{tmp_path / 'plan.json'} is not a b12x-launch plan ({says}" in out.output
        assert "internal error" not in out.output and "Traceback" not in out.output


@pytest.mark.parametrize(
    "text, says",
    [
        ("{oops", "unreadable measurement record {path}"),
        (
            json.dumps({"schema": RECORD_SCHEMA_V1, "rank": 1, "measured": {"weights": -1}}),
            "{path}: malformed measured figures",
        ),
        (
            json.dumps(
                {
                    "schema": RECORD_SCHEMA,
                    "fingerprint": "f",
                    "rank": 1,
                    "when": "?",
                    "measured": {"weights": -1},
                }
            ),
            "{path}: malformed measured.weights: Input should be greater than or equal to 0",
        ),
    ],
    ids=["unreadable", "malformed", "malformed-v2"],
)
def test_report_skips_a_bad_record_with_a_warning_naming_it(tmp_path, write, text, says):
    run, _ = make_run(tmp_path, write)
    path = run / "measure-rank1.json"
    path.write_text(text)
    for args in ([], ["--plot", str(tmp_path / "run.svg")]):
        out = CliRunner().invoke(cli, ["report", str(run), *args])
        assert out.exit_code == 0, out.output
        assert f"warning: ignoring {says.format(path=path)}" in " ".join(out.output.split())
        assert "RANK 1 (GiB)" not in out.output and "Traceback" not in out.output


def test_the_census_reaches_the_report_the_next_dry_run_and_the_prewarm_list(tmp_path, write):
    """A late compile recorded by a boot: report names it and what the next boot does; the
    next dry run reserves what cannot be replayed; prewarm --list shows the learned entries."""
    path = write("p.yaml", MINIMAL)
    sets = ["--set", f"runtime.cache_root={tmp_path}"]
    plan = json.loads(CliRunner().invoke(cli, [str(path), "--json", *sets]).output)
    profile = load_profile(path, [f"runtime.cache_root={tmp_path}"]).profile
    late = [
        census.entry("triton", "vllm.ops.fused_moe_kernel", "[BLOCK_SIZE_M=64]", 0, '{"n": 1}'),
        census.entry("b12x", "sparse_mla.extend", " m=3072", 96 * 2**20),
    ]
    run = tmp_path / "run"
    run.mkdir()
    (run / "plan.json").write_text(json.dumps(plan))
    for rank in range(4):
        save_record(
            {
                "fingerprint": plan["fingerprint"],
                "rank": rank,
                "when": "2026-11-30",
                "measured": {"jit_headroom": 64 * 2**20},
                "late_compiles": late,
            },
            run,
            profile,
        )
    report = CliRunner().invoke(cli, ["report", str(run)]).output
    assert "fused_moe_kernel[BLOCK_SIZE_M=64]: prewarmed before sizing (census replay)" in report
    assert "sparse_mla.extend m=3072: reserved in jit_headroom (96 MiB measured)" in report
    dry = json.loads(CliRunner().invoke(cli, [str(path), "--json", *sets]).output)
    headroom = dry["ranks"][0]["components"]["jit_headroom"]
    assert headroom["bytes"] == (64 + 96) * 2**20 and headroom["source"] == "measured"
    assert len(dry["ranks"][0]["learned"]) == 2
    table = CliRunner().invoke(cli, [str(path), "--dry-run", *sets]).output
    assert "learned (rank 0): triton vllm.ops.fused_moe_kernel" in table
    listing = CliRunner().invoke(cli, ["prewarm", str(path), "--list", *sets]).output
    assert "census: 2 specialization(s)" in listing and "learned: b12x sparse_mla.extend" in listing


@pytest.mark.parametrize("log", ["/dev/zero", "fifo"])
def test_report_reads_no_log_that_is_not_a_file(tmp_path, write, log):
    """A run's log is input: a device or FIFO given as --log is refused by name, not read
    until memory runs out (in a subprocess, under a time and memory limit)."""
    from tests.conftest import run_cli

    run, _ = make_run(tmp_path, write)
    if log == "fifo":
        log = str(tmp_path / "fifo")
        os.mkfifo(log)
    result = run_cli(["report", str(run), "--log", log], timeout=30)
    assert result.returncode == 1, result.stderr
    assert f"cannot read the vLLM log {log}" in result.stderr
    assert "Traceback" not in result.stderr


def test_report_on_records_with_parts_no_worker_writes(tmp_path, write):
    """A record is typed whole: one with a part no worker writes is left out, named with the
    key (the report goes on with the others)."""
    run, _ = make_run(tmp_path, write)
    record = json.loads((run / "measure-rank1.json").read_text())
    record["late_compiles"] = [{"kind": "triton", "kernel": "k", "cost_bytes": "lots"}]
    (run / "measure-rank1.json").write_text(json.dumps(record))
    record["kv"] = {"blocks": 1, "tokens": "many", "planned_tokens": 1}
    (run / "measure-rank2.json").write_text(json.dumps(record))
    out = CliRunner().invoke(cli, ["report", str(run)])
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "measure-rank1.json: malformed late_compiles.0.cost_bytes" in text
    assert "measure-rank2.json: malformed" in text and "kv.tokens" in text
    assert "RANK 1 (GiB)" not in text and "RANK 3 (GiB)" in text


def test_report_says_free_memory_after_the_warmup_and_while_serving_against_the_margin(
    tmp_path, write
):
    from launcher.contract.record import RankRecord

    run, _ = make_run(tmp_path, write)
    profile = load_profile(write("p.yaml", MINIMAL), [f"runtime.cache_root={tmp_path}"]).profile
    path = run / "measure-rank1.json"
    record = RankRecord.model_validate(json.loads(path.read_text()))
    served = record.model_copy(
        update={
            "free_after_warmup": 2**30,
            "serving_low_free": 2**28,
            "reserved_after_warmup": 2**28,
            "serving_low_reserved": 2**29 + 2**28,
        }
    )
    save_record(served, run, profile)
    out = CliRunner().invoke(cli, ["report", str(run)])
    assert out.exit_code == 0, out.output
    lines = out.output.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("rank 1:"))
    said = lines[at + 1]
    assert said.startswith("  free memory: after vLLM's warmup 1.00 GiB, lowest while serving 256")
    text = " ".join(out.output.split())
    assert "BELOW IT" in text, said  # MINIMAL keeps 512 MiB
    assert "(of the 768.00 MiB serving took, torch's segments 512.00 MiB)" in text, said
    assert sum("free memory:" in x for x in lines) == 1  # the other ranks measured none
    # the reserves held (512 MiB, all the segments serving reached), 128 MiB drawn inside
    drew = {"allocated_after_warmup": 2**28, "serving_peak_allocated": 2**28 + 2**27}
    held = served.model_copy(update={"held_for_serving": 2**29, "serving_low_free": 2**29, **drew})
    save_record(held, run, profile)
    out = CliRunner().invoke(cli, ["report", str(run)])
    text = " ".join(out.output.split())
    assert "(held 512.00 MiB for serving's reserves; serving took 128.00 MiB)" in text, text


def test_report_shows_the_downgrades_a_vllm_release_cost_the_boot(tmp_path, write):
    """The worker's check before the weights (``launcher.vllm.check``) is recorded and shown."""
    from launcher.contract.record import InternalsCheck, MissingInternal, RankRecord

    run, _ = make_run(tmp_path, write)
    profile = load_profile(write("p.yaml", MINIMAL), [f"runtime.cache_root={tmp_path}"]).profile
    path = run / "measure-rank0.json"
    record = RankRecord.model_validate(json.loads(path.read_text()))
    gap = MissingInternal(
        name="warmup.block_table",
        where="vllm.model_executor.warmup.v1_block_table_warmup:warm_v1_block_table_kernels",
        needed_by="vllm",
        without="skip",
        says="the block-table kernels compile after sizing",
        why="absent",
    )
    checked = InternalsCheck(release="0.34.0", missing=[gap])
    save_record(record.model_copy(update={"internals": checked}), run, profile)
    out = CliRunner().invoke(cli, ["report", str(run)])
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "downgrade: vllm: not done on vLLM 0.34.0: warmup.block_table missing" in text


@pytest.mark.parametrize("change", ["fingerprint", "rank"])
def test_report_leaves_out_a_record_of_another_plan_or_rank_naming_both(tmp_path, write, change):
    """Issue 64, item 9: a record copied into the run (another plan's, or another rank's under
    this rank's name) is not shown as this run's measurement."""
    run, plan = make_run(tmp_path, write)
    path = run / "measure-rank1.json"
    data = json.loads(path.read_text())
    data["fingerprint" if change == "fingerprint" else "rank"] = (
        "fedcba987654" if change == "fingerprint" else 3
    )
    path.write_text(json.dumps(data))
    out = CliRunner().invoke(cli, ["report", str(run)])
    assert out.exit_code == 0, out.output
    assert "measure-rank1.json" in out.output and "left out" in out.output
    if change == "fingerprint":
        assert "fedcba987654" in out.output and plan["fingerprint"] in out.output
    else:
        assert "a record of rank 3" in out.output
    assert "RANK 1 (GiB)" not in out.output
