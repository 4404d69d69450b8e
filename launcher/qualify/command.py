"""``b12x-launch qualify``: boot, drive the worst case, measure, stop, pin, (verify).

One boot at the planned size through the planned worker (``launch.prepare``, then a
child process instead of ``exec``); the workload runs through the OpenAI API on
loopback while NVML samples each rank's free memory; the KV size that would have left
exactly the safety margin at the worst moment is recorded in the run directory and the
calibration store, where the next plan of this deployment pins it. ``--verify`` boots
once more through that next plan and runs the workload again.
"""

from __future__ import annotations

import datetime
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launcher import atomic
from launcher.calibration import stack_versions, store_dir
from launcher.errors import EnvironmentProblem, LauncherError
from launcher.launch import prepare
from launcher.pipeline import Planned, make_plan
from launcher.profile import LoadedProfile
from launcher.qualify.ceiling import NoKvLeft, RankObservation, qualified_kv
from launcher.qualify.client import WorkloadResult, health, run_workload
from launcher.qualify.progress import Progress
from launcher.qualify.record import NAME, save_qualified
from launcher.qualify.sampler import FreeMemorySampler, late_compiles, nvml_readers, rank_records
from launcher.qualify.server import ServerProcess
from launcher.qualify.workload import Workload, worst_case
from launcher.units import format_size


class QualifyFailed(LauncherError):
    """The deployment did not survive its worst case (or the verify boot did not)."""


@dataclass
class Boot:
    """One boot's evidence: what the workers got, what the workload did, what was free."""

    planned: Planned
    run_dir: Path
    result: WorkloadResult
    records: dict[int, dict[str, Any]]
    low_water: dict[int, int]
    sampled: bool
    samples: int
    exit_code: int | None
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def late(self) -> list[dict[str, Any]]:
        return late_compiles(self.records)

    @property
    def blocks(self) -> dict[int, int]:
        return {r: int(d.get("kv", {}).get("blocks", 0)) for r, d in self.records.items()}

    def survived(self) -> bool:
        return not self.result.failed and not self.result.timed_out

    def summary(self) -> dict[str, Any]:
        return {
            "run_dir": str(self.run_dir),
            "kv_blocks": self.blocks,
            "workload": self.result.to_dict(),
            "low_water_free": self.low_water,
            "sampled": self.sampled,
            "samples": self.samples,
            "late_compiles": self.late,
            "exit_code": self.exit_code,
            "seconds": {k: round(v, 1) for k, v in self.seconds.items()},
        }


def qualify(
    loaded: LoadedProfile,
    *,
    run_dir: str | None,
    verify: bool,
    force: bool = False,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Qualify ``loaded``; the record written (also in the calibration store)."""
    profile = loaded.profile
    if profile.hardware.nodes > 1:
        raise EnvironmentProblem(
            f"qualify drives one node; this profile spans {profile.hardware.nodes} "
            "(hardware.nodes): qualify a one-node profile of the same cards"
        )
    progress = progress or Progress()
    started = time.monotonic()
    root = _root(loaded, run_dir)
    planned = make_plan(loaded, use_qualified=False)
    workload = worst_case(profile)
    progress.say(f"workload: {workload.describe()}")
    with _stop_on_sigterm():
        first = boot(planned, root, workload, progress, "qualify", force=force)
        if not first.survived():
            _write_failure(root, first, workload)
            raise QualifyFailed(
                f"the deployment did not survive its worst case at the planned KV size "
                f"({_failures(first.result)}); see {first.run_dir / 'vllm.log'}. Raise "
                "memory.safety_margin or lower serving.max_num_seqs, then qualify again"
            )
        record = _record(first, workload, profile.memory.safety_margin)
        record["seconds"] = round(time.monotonic() - started, 1)
        save_qualified(record, root, profile, planned.fingerprint)
        kv = record["kv"]
        progress.say(
            f"qualified {kv['blocks']:,} blocks = {kv['tokens']:,} tokens "
            f"({format_size(kv['bytes'])} per rank; the plan gave "
            f"{record['planned']['blocks']:,} blocks), recorded in {root / NAME}"
        )
        if first.late:
            progress.say(f"warning: {len(first.late)} late compile(s) recorded in the census")
        if verify:
            record = _verify(loaded, root, workload, record, progress, force)
            record["seconds"] = round(time.monotonic() - started, 1)
            save_qualified(record, root, profile, planned.fingerprint)
    return record


def boot(
    planned: Planned,
    run_dir: Path,
    workload: Workload,
    progress: Progress,
    label: str,
    *,
    force: bool = False,
) -> Boot:
    """Start vLLM from ``planned`` in ``run_dir``, run ``workload``, stop it."""
    profile = planned.loaded.profile
    port = profile.serving.port
    if health(port):
        raise EnvironmentProblem(
            f"a server already answers on 127.0.0.1:{port}; stop it or pass "
            "--set serving.port=<a free port>"
        )
    progress.phase(f"{label}: booting")
    prepared = prepare(planned, force=force, run_dir=str(run_dir))
    ranks = len(prepared.planned.plan.ranks)
    readers = None if profile.hardware.gpu == "cpu" else nvml_readers(ranks)
    sampler = FreeMemorySampler(readers, profile.qualify.sample_ms / 1000)
    sampling = "NVML" if sampler.available else "no physical sampling"
    server = ServerProcess(prepared, port)
    times: dict[str, float] = {}
    done = threading.Event()

    def arm_when_kv_exists() -> None:
        if sampler.armed:
            return
        records = rank_records(run_dir)
        if len(records) >= ranks and all("kv" in d for d in records.values()):
            sampler.arm()

    def ticker() -> None:
        while not done.wait(0.5):
            progress.low_water(sampler.low_water_min(), sampling)

    threading.Thread(target=ticker, name="qualify-progress", daemon=True).start()
    counts = {"done": 0, "failed": 0}
    lock = threading.Lock()

    def on_outcome(outcome) -> None:
        with lock:
            counts["done" if outcome.ok else "failed"] += 1
            progress.requests(counts["done"], counts["failed"], len(workload.requests))

    result = WorkloadResult()
    code = None
    t0 = time.monotonic()
    try:
        server.start()
        sampler.start()
        times["boot"] = server.wait_healthy(profile.qualify.boot_seconds, arm_when_kv_exists)
        arm_when_kv_exists()
        if not sampler.armed:
            sampler.arm()  # a worker without a "kv" entry: count from now
        progress.phase(f"{label}: running the workload")
        facts = prepared.planned.inputs.facts
        model = profile.model.served_name or profile.model.path
        t1 = time.monotonic()
        result = run_workload(port, model, workload, facts.vocab, on_outcome, server.alive)
        times["workload"] = time.monotonic() - t1
        if not server.alive():
            result.outcomes.append(_died(server))
    finally:
        progress.phase(f"{label}: stopping the server")
        sampler.stop()
        done.set()
        code = server.stop()
        times["total"] = time.monotonic() - t0
    return Boot(
        planned=prepared.planned,
        run_dir=run_dir,
        result=result,
        records=rank_records(run_dir),
        low_water=dict(sampler.low_water),
        sampled=sampler.available,
        samples=sampler.samples,
        exit_code=code,
        seconds=times,
    )


def observations(b: Boot) -> list[RankObservation]:
    """Each rank's KV bytes (its blocks x page) and low-water free memory. Without
    physical sampling the low-water mark is taken as exactly the safety margin: the
    size the workers got is what survived."""
    page = b.planned.plan.kv.layout.page_bytes
    margin = b.planned.loaded.profile.memory.safety_margin
    out = []
    for rank, blocks in sorted(b.blocks.items()):
        low = b.low_water.get(rank, margin) if b.sampled else margin
        out.append(RankObservation(rank, blocks * page, low, page))
    return out


def _record(b: Boot, workload: Workload, margin: int) -> dict[str, Any]:
    kv_plan = b.planned.plan.kv
    layout = kv_plan.layout
    obs = observations(b)
    if not obs:
        raise QualifyFailed(
            f"no worker wrote a measurement record with its KV cache into {b.run_dir}; "
            "is vllm.worker_cls the planned worker (auto)?"
        )
    try:
        ceiling = qualified_kv(obs, margin, layout.block_tokens, layout.dcp)
    except NoKvLeft as exc:
        raise QualifyFailed(f"{exc}; lower serving.max_num_seqs or max_model_len") from None
    return {
        "when": datetime.datetime.now().isoformat(timespec="seconds"),
        "profile": b.planned.loaded.profile.name,
        "environment": _environment(b.planned.loaded.profile.hardware.gpu),
        "kv": {
            "blocks": ceiling.blocks,
            "tokens": ceiling.tokens,
            "bytes": ceiling.kv_bytes,
            "page_bytes": layout.page_bytes,
            "block_tokens": layout.block_tokens,
            "dcp": layout.dcp,
            "bounding_rank": ceiling.bounding_rank,
        },
        "planned": {"blocks": kv_plan.blocks_per_rank, "tokens": kv_plan.tokens},
        "safety_margin": margin,
        "basis": (
            "NVML low-water free memory while the workload ran"
            if b.sampled
            else "no physical sampling (CPU or no NVML): the KV size the workers got, "
            "which survived the workload"
        ),
        "ranks": [
            {
                "rank": o.rank,
                "kv_bytes": o.kv_bytes,
                "low_water_free": o.low_water_free if b.sampled else None,
                "headroom": ceiling.headroom[o.rank] if b.sampled else None,
                "new_kv_bytes": o.new_kv_bytes(margin),
            }
            for o in obs
        ],
        "workload": workload.to_dict(),
        "late_compiles": b.late,
        "boots": 1,
        "qualify_boot": b.summary(),
    }


def _verify(
    loaded: LoadedProfile,
    root: Path,
    workload: Workload,
    record: dict[str, Any],
    progress: Progress,
    force: bool,
) -> dict[str, Any]:
    """Boot through the next launch's plan (the qualified pin) and run the workload again."""
    planned = make_plan(loaded)
    kv = planned.plan.kv
    if kv.pinned != "qualified" or kv.blocks_per_rank != record["kv"]["blocks"]:
        raise QualifyFailed(
            f"the next plan does not pick up the qualified size (pinned {kv.pinned}, "
            f"{kv.blocks_per_rank} blocks); a pin in the profile (memory.kv_tokens or "
            "memory.kv_cache_bytes) takes precedence: remove it"
        )
    second = boot(planned, root / "verify", workload, progress, "verify", force=force)
    got = set(second.blocks.values())
    passed = second.survived() and got == {record["kv"]["blocks"]}
    record = {**record, "boots": 2}
    record["verify"] = {
        "passed": passed,
        "late_compiles": second.late,
        "min_headroom": (
            min(second.low_water.values()) - record["safety_margin"] if second.low_water else None
        ),
        **second.summary(),
    }
    if not passed:
        _withdraw(loaded, planned.fingerprint)
        atomic.write_json(root / NAME, {"schema": "b12x-launch/qualified/1", **record})
        why = _failures(second.result) if not second.survived() else f"KV blocks {sorted(got)}"
        raise QualifyFailed(
            f"the verify boot at the qualified size failed ({why}); the qualified size is "
            f"withdrawn from the calibration store. See {second.run_dir / 'vllm.log'}"
        )
    low = record["verify"]["min_headroom"]
    progress.say(
        "verify passed: the workload ran at the qualified size"
        + (f", lowest headroom above the margin {format_size(low)}" if low is not None else "")
        + (f"; {len(second.late)} late compile(s)" if second.late else "; no late compile")
    )
    return record


def _withdraw(loaded: LoadedProfile, fingerprint: str) -> None:
    (store_dir(loaded.profile, fingerprint) / NAME).unlink(missing_ok=True)


def _write_failure(root: Path, b: Boot, workload: Workload) -> None:
    atomic.write_json(
        root / "qualify-failed.json",
        {"workload_spec": workload.to_dict(), **b.summary()},
    )


def _failures(result: WorkloadResult) -> str:
    failed = result.failed
    first = failed[0].error if failed else "out of time"
    return f"{len(failed)} of {len(result.outcomes)} requests failed; first: {first[:300]}"


def _died(server: ServerProcess):
    from launcher.qualify.client import Outcome

    code = server.proc.returncode if server.proc else None
    return Outcome(-1, False, 0.0, error=f"the server exited ({code}) during the workload")


def _environment(gpu_kind: str) -> dict[str, Any]:
    env: dict[str, Any] = {"gpu_kind": gpu_kind, **stack_versions()}
    if gpu_kind != "cpu":
        from launcher.hardware import NoGpuInfo, query_gpus

        try:
            gpus = query_gpus()
        except NoGpuInfo:
            gpus = []
        if gpus and gpus[0].driver:
            env["driver"] = gpus[0].driver
    return env


def _root(loaded: LoadedProfile, run_dir: str | None) -> Path:
    if run_dir:
        return Path(run_dir)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(loaded.profile.runtime.run_dir) / f"{stamp}-{loaded.profile.name}-qualify"


class _stop_on_sigterm:
    """SIGTERM unwinds like Ctrl-C, so the server is stopped on the way out."""

    def __enter__(self):
        def handler(signum, frame):
            raise KeyboardInterrupt

        try:
            self._old = signal.signal(signal.SIGTERM, handler)
        except ValueError:  # not the main thread
            self._old = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._old is not None:
            signal.signal(signal.SIGTERM, self._old)
