"""One real boot: ``python3 -m launcher PROFILE --force`` as a subprocess, logs to a file,
the stress workload while NVML samples, a clean stop, then the dry run that reads the
measurements back. Everything a test asserts on is kept in a ``BootResult``.

The server is always stopped (SIGINT, 60 s, then SIGKILL to its process group) and the
cards waited on until idle before this returns, so boots never overlap.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import ROOT
from tests.gpu import models, nvml, stress
from tests.integration.server import free_port

PROFILES = Path(__file__).resolve().parent / "profiles"
CONFIG_HASHES = Path(__file__).resolve().parent / "config_hashes"
START_TIMEOUT = float(os.environ.get("GPU_TIER_START_TIMEOUT") or 300.0)
"""Seconds a boot may take to answer ``/health``. A first boot with FlashInfer's sampler and
no FlashInfer JIT cache builds its sampling module in the stage's first step (194 s on the
H100, 2026-12-06): such a run sets more."""
STOP_TIMEOUT = 60.0
STRICT_EXIT_TIMEOUT = 90.0
IDLE_USED = 2 * 1024**3
"""A card with less than this in use counts as idle (driver and NVML overhead only)."""


@dataclass(frozen=True)
class BootSpec:
    name: str
    profile: str
    """File name under tests/gpu/profiles."""
    model: str
    """A kind in ``tests.gpu.models.BUILDERS``."""
    sets: tuple[str, ...] = ()
    strict_jit: bool = False
    ranks: int = 1
    cache: str = ""
    """A cache root of its own under the lab's (empty on a first boot); default: the lab's."""
    plain: bool = False
    """Plain vLLM: its own worker class, no prewarm (same flags, model and workload)."""
    workload: str = "mixed"
    """``tests.gpu.stress.KINDS``: the tier's mixed waves, qualify's worst case, or one
    streamed MTP generation beside max_num_seqs short prompts."""
    seed: int | None = None
    """The users workload's seed where ``GPU_TIER_SEED`` names none (None: drawn)."""
    cache_from: str = ""
    """A cache artifact to restore before vLLM starts (``--cache-from``): its name under the
    lab's artifacts (``Lab.artifact``); none by default."""
    env: tuple[tuple[str, str], ...] = ()
    """Variables added to the launch's environment (a diagnostic of torch's such as
    ``TORCH_LOGS``); the launcher passes them on to vLLM and its workers. The stage's own
    switches are profile keys (``sets``: ``prewarm.compile_times=true``)."""

    @property
    def prewarm(self) -> bool:
        return not self.plain and "prewarm.enabled=false" not in self.sets


@dataclass
class BootResult:
    spec: BootSpec
    run_dir: Path
    log_path: Path
    devices: list[int]
    """NVML index of each rank's GPU (rank r on ``devices[r]``)."""
    healthy: bool = False
    exit_code: int | None = None
    stopped_by_us: bool = False
    exit_seconds: float | None = None
    """Strict runs: seconds from the late request to the server's own exit."""
    plan: dict[str, Any] = field(default_factory=dict)
    records: dict[int, dict[str, Any]] = field(default_factory=dict)
    outcome: stress.Outcome | None = None
    calibrated: dict[str, Any] | None = None
    dry_run_error: str = ""
    idle_used_before: dict[int, int] = field(default_factory=dict)
    ballast: bool = False
    ready_seconds: float | None = None
    """From the launcher's start to /health answering."""
    plan_seconds: float | None = None
    """From the launcher's start to its plan file (the launcher's own part of the start:
    planning, the checks before the exec, the restore of an artifact)."""
    late_files: list[str] | None = None
    """Files that appeared in the boot's compile caches after its workers armed their
    counters (``launcher.runtime.cache_oracle``), read after the workload; None where no
    baseline was written (plain vLLM): not measured, which is not none."""

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def tail(self, n: int = 6000) -> str:
        return self.log()[-n:]

    @property
    def late_compiles(self) -> dict[int, list[str]]:
        return {r: list(rec.get("late_compiles", [])) for r, rec in self.records.items()}

    @property
    def monitor_late(self) -> list[str]:
        """What vLLM's own JIT monitor logged as compiled during inference (after its
        warmup), one line per event under ``--jit-monitor-verbose``."""
        return [ln for ln in self.log().splitlines() if "compilation during inference" in ln]

    @property
    def margin(self) -> int:
        return int(self.plan["profile_data"]["memory"]["safety_margin"])

    @property
    def page_bytes(self) -> int:
        return int(self.plan["kv"]["page_bytes_per_rank"])


@dataclass(frozen=True)
class Lab:
    """Where boots put their files, and the machine's facts."""

    root: Path
    models: Path
    cache: Path
    devices: list[int]
    ballast: bool = False

    def env(self) -> dict[str, str]:
        bindir = str(Path(sys.executable).parent)
        return {
            **os.environ,
            "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
            "HF_HUB_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }

    def argv(self, spec: BootSpec, port: int, run_dir: Path, *more: str) -> list[str]:
        """``python3 -m launcher PROFILE --force --run-dir RUN`` with the lab's settings."""
        artifact = ["--cache-from", str(self.artifact(spec.cache_from))] if spec.cache_from else []
        return [
            sys.executable,
            "-m",
            "launcher",
            str(PROFILES / spec.profile),
            "--force",
            "--run-dir",
            str(run_dir),
            *self.sets(spec, port),
            *artifact,
            *more,
        ]

    def artifact(self, name: str) -> Path:
        """Where the artifact ``name`` is baked: beside the cache roots, not in one (kept
        between calls on a warm machine, as the caches are)."""
        return self.cache.parent / "artifacts" / name

    def cache_root(self, spec: BootSpec) -> Path:
        """The boot's ``runtime.cache_root``: its own under the lab's, or the lab's."""
        return self.cache / spec.cache if spec.cache else self.cache

    def sets(self, spec: BootSpec, port: int) -> list[str]:
        model = models.write(spec.model, self.models / spec.model)
        plain = ["vllm.worker_cls=vllm.v1.worker.gpu_worker.Worker", "prewarm.enabled=false"]
        pairs = [
            f"model.path={model}",
            "serving.host=127.0.0.1",
            f"serving.port={port}",
            f"runtime.cache_root={self.cache_root(spec)}",
            *(plain if spec.plain else []),
            # the card the device lent, where it is not the profiles' H200 (run-tier.sh)
            *(
                [f"hardware.gpu={os.environ['GPU_TIER_GPU']}"]
                if os.environ.get("GPU_TIER_GPU")
                else []
            ),
            *spec.sets,
        ]
        return [a for s in pairs for a in ("--set", s)]


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
            return r.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
        return False


def _wait_healthy(proc: subprocess.Popen, url: str) -> bool:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if _healthy(url):
            return True
        time.sleep(0.5)
    return False


def _stop(proc: subprocess.Popen) -> int | None:
    """SIGINT to vLLM's API server (the launcher exec'd into it), then the group's SIGKILL."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGINT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=STOP_TIMEOUT)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=30)
    return proc.returncode


def _workload(lab: Lab, spec: BootSpec, plan: dict, port: int, deadline: float) -> stress.Workload:
    serving = plan["profile_data"]["serving"]
    vocab = json.loads((lab.models / spec.model / "config.json").read_text())["vocab_size"]
    return stress.Workload(
        url=f"http://127.0.0.1:{port}",
        model=plan["profile_data"]["model"]["served_name"] or "tier",
        max_model_len=int(serving["max_model_len"]),
        max_num_seqs=int(serving["max_num_seqs"]),
        max_num_batched_tokens=int(serving["max_num_batched_tokens"]),
        vocab=int(vocab),
        deadline=deadline,
        spec_tokens=int(plan["profile_data"]["speculative"]["tokens"]),
        seed=spec.seed,
    )


def dry_run(lab: Lab, spec: BootSpec, port: int) -> tuple[dict | None, str]:
    """The next plan, as a user would ask for it after this run (calibration read back)."""
    argv = [
        sys.executable,
        "-m",
        "launcher",
        str(PROFILES / spec.profile),
        "--dry-run",
        "--json",
        *lab.sets(spec, port),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, env=lab.env(), timeout=120)
    if done.returncode not in (0, 3):
        return None, f"exit {done.returncode}: {done.stderr[-2000:]}"
    return json.loads(done.stdout), done.stderr[-2000:]


def _keep_compile_factors(cache_root: Path, work: Path) -> None:
    """vLLM's ``cache_key_factors.json`` of every config-hash directory under the boot's cache
    root, into its work dir (packed with the logs): which factor put a warm boot's compiled
    pieces under another directory than the baked boot's (2026-12-04)."""
    from launcher.vllm.compile_cache import factor_files

    out = work / "compile-factors"
    for path, _ in factor_files(cache_root):
        part = path.parent  # <hash>/rank_<r>_<dp>/<part>/cache_key_factors.json
        out.mkdir(exist_ok=True)
        (out / f"{part.parent.parent.name}-{part.parent.name}-{part.name}.json").write_bytes(
            path.read_bytes()
        )


def with_config_hashes(env: dict[str, str], work: Path) -> dict[str, str]:
    """``env`` with the boot's processes writing every vLLM config hash and its factors into
    ``<work>/config-hashes`` (``tests/gpu/config_hashes/sitecustomize.py``, first on the path):
    which factor of which config moved a warm boot's compiled pieces (the factor files keep
    only digests)."""
    path = os.pathsep.join(filter(None, [str(CONFIG_HASHES), env.get("PYTHONPATH")]))
    return {**env, "BLAUNCH_TIER_CONFIG_HASHES": str(work / "config-hashes"), "PYTHONPATH": path}


def boot(lab: Lab, spec: BootSpec, deadline: float = 120.0) -> BootResult:
    """Start, stress (or, under strict JIT, provoke one late compile), stop, read back."""
    work = lab.root / spec.name
    work.mkdir(parents=True, exist_ok=True)
    devices = lab.devices[: spec.ranks]
    result = BootResult(spec, work / "run", work / "server.log", devices, ballast=lab.ballast)
    result.idle_used_before = nvml.wait_idle(devices, IDLE_USED if not lab.ballast else 1 << 60)
    port = free_port()
    argv = lab.argv(spec, port, result.run_dir, *(["--strict-jit"] if spec.strict_jit else []))
    (work / "argv.json").write_text(json.dumps(argv))
    with result.log_path.open("w") as log:
        proc = subprocess.Popen(
            argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=with_config_hashes({**lab.env(), **dict(spec.env)}, work),
            start_new_session=True,
        )
    (work / "server.pid").write_text(str(proc.pid))  # run-tier.sh ends a group left behind
    started, wall = time.monotonic(), time.time()
    try:
        result.healthy = _wait_healthy(proc, f"http://127.0.0.1:{port}")
        if result.healthy:
            result.ready_seconds = time.monotonic() - started
            result.plan = json.loads((result.run_dir / "plan.json").read_text())
            result.plan_seconds = (result.run_dir / "plan.json").stat().st_mtime - wall
            work_load = _workload(lab, spec, result.plan, port, deadline)
            if spec.strict_jit:
                _provoke(result, proc, work_load)
            else:
                result.outcome = stress.run(
                    work_load, devices, spec.workload, PROFILES / spec.profile
                )
        from launcher.runtime import cache_oracle

        result.late_files = cache_oracle.late_files(result.run_dir)  # before the stop's writes
    finally:
        result.stopped_by_us = proc.poll() is None
        result.exit_code = _stop(proc)
    _read_back(result)
    _keep_compile_factors(lab.cache_root(spec), work)
    nvml.wait_idle(devices, IDLE_USED if not lab.ballast else 1 << 60)
    if result.healthy and not spec.strict_jit and not spec.plain:
        result.calibrated, result.dry_run_error = dry_run(lab, spec, port)
    (work / "result.json").write_text(json.dumps(summary_facts(result), indent=1, default=str))
    return result


def _provoke(result: BootResult, proc: subprocess.Popen, w: stress.Workload) -> None:
    """Send the shapes no warmup ran, one at a time, until the server stops by itself."""
    start = time.monotonic()
    for n in stress.SHAPES:
        if proc.poll() is not None:
            break
        with contextlib.suppress(OSError, ValueError):
            stress.complete(w, stress.prompt(n, 7919 * n, w.vocab), 2, timeout=60)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=STRICT_EXIT_TIMEOUT)
    if proc.poll() is not None:
        result.exit_seconds = time.monotonic() - start


def _read_back(result: BootResult) -> None:
    plan = result.run_dir / "plan.json"
    if not result.plan and plan.exists():
        result.plan = json.loads(plan.read_text())
    for path in sorted(result.run_dir.glob("measure-rank*.json")):
        rank = int(path.stem.removeprefix("measure-rank"))
        result.records[rank] = json.loads(path.read_text())


def carried_mismatches(plan: dict[str, Any], records: dict[int, dict[str, Any]]) -> list[str]:
    """Where ``plan`` does not call each figure of ``records`` measured, to the byte: one line
    per rank. ``records`` are keyed by integer rank, as ``_read_back`` and a session's boots
    keep them; a rank without a record, a record without figures and a plan without ranks are
    mismatches too, so nothing passes for want of data."""
    if not plan.get("ranks"):
        return ["the plan has no ranks"]
    out = []
    for rank, planned in enumerate(plan["ranks"]):
        record = records.get(rank)
        if record is None:
            out.append(f"rank {rank}: no record (the records hold ranks {sorted(records)})")
            continue
        theirs = record.get("measured") or {}
        if not theirs:
            out.append(f"rank {rank}: its record holds no measured figure")
            continue
        comps = planned["components"]
        ours = {k: comps[k]["bytes"] for k in theirs if comps[k]["source"] == "measured"}
        if ours != theirs:
            out.append(f"rank {rank}: the plan's measured {ours}, the record's {theirs}")
    return out


def summary_facts(r: BootResult) -> dict[str, Any]:
    """What result.json keeps of a boot (and the summary table reads)."""
    return {
        "name": r.spec.name,
        "profile": r.spec.profile,
        "prewarm": r.spec.prewarm,
        "strict_jit": r.spec.strict_jit,
        "healthy": r.healthy,
        "plain": r.spec.plain,
        "sets": list(r.spec.sets),
        "ready_seconds": r.ready_seconds,
        "plan_seconds": r.plan_seconds,
        "monitor_late": r.monitor_late,
        "late_files": r.late_files,
        "exit_code": r.exit_code,
        "stopped_by_us": r.stopped_by_us,
        "exit_seconds": r.exit_seconds,
        "devices": r.devices,
        "ballast": r.ballast,
        "idle_used_before": r.idle_used_before,
        "outcome": r.outcome.to_dict() if r.outcome else None,
        "calibrated_kv": (r.calibrated or {}).get("kv"),
        "artifact": r.plan.get("artifact"),
        "dry_run_error": r.dry_run_error,
        "records": r.records,
    }
