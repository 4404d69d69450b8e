"""One boot of the deployment under the workload: start vLLM from a plan, wait for
/health, arm the sampler once every worker has its KV cache, drive the workload, stop.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from launcher.contract.qualified import BootSummary, LateSeen, WorkloadDone
from launcher.contract.record import RankRecord
from launcher.contract.runfile import PLAN_FILE, read_run_file
from launcher.errors import EnvironmentProblem
from launcher.pipeline import Planned, prepare
from launcher.qualify.ceiling import RankObservation
from launcher.qualify.client import Outcome, WorkloadResult, health, run_workload
from launcher.qualify.progress import Progress
from launcher.qualify.sampler import FreeMemorySampler, late_compiles, nvml_readers, rank_records
from launcher.qualify.server import ServerProcess
from launcher.qualify.workload import Workload


@dataclass
class Boot:
    """One boot's evidence: what the workers got, what the workload did, what was free."""

    planned: Planned
    run_dir: Path
    result: WorkloadResult
    records: dict[int, RankRecord]
    low_water: dict[int, int]
    sampled: bool
    samples: int
    exit_code: int | None
    seconds: dict[str, float] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)
    """A message naming each measurement record that could not be read."""
    driver: str | None = None
    """The GPU driver the launcher read on the cards, from the boot's run file."""
    gpu_kind: str | None = None
    """The cards' kind the launcher read, from the boot's run file (None: not read)."""

    def on_profiles_cards(self) -> bool:
        """Whether this boot ran on the kind of card the profile names (``other_cards``)."""
        from launcher.contract.store import other_cards

        return not other_cards(self.gpu_kind, self.planned.loaded.profile.hardware.gpu)

    @property
    def late(self) -> list[LateSeen]:
        return late_compiles(self.records)

    @property
    def blocks(self) -> dict[int, int]:
        return {r: rec.kv.blocks if rec.kv else 0 for r, rec in self.records.items()}

    def survived(self) -> bool:
        return not self.result.failed and not self.result.timed_out

    def summary(self) -> BootSummary:
        return BootSummary(
            run_dir=str(self.run_dir),
            kv_blocks=self.blocks,
            workload=WorkloadDone.model_validate(self.result.to_dict()),
            low_water_free=self.low_water,
            sampled=self.sampled,
            samples=self.samples,
            late_compiles=self.late,
            exit_code=self.exit_code,
            seconds={k: round(v, 1) for k, v in self.seconds.items()},
        )


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
    # The driver NVML reported to prepare, as its run file hands it to the workers:
    # the qualified record carries the same value, without asking the GPUs again.
    run_file = read_run_file(prepared.run_dir / PLAN_FILE)
    driver = run_file.cards.driver
    ranks = len(prepared.planned.plan.ranks)
    readers = None if profile.hardware.gpu == "cpu" else nvml_readers(ranks, prepared.env)
    if profile.hardware.gpu != "cpu" and readers is None:
        raise EnvironmentProblem(
            "qualify samples GPU memory through NVML, which is not available: install "
            "nvidia-ml-py (pip install '.[serve]' in the b12x-launch checkout) and check that "
            "the NVIDIA driver is loaded (nvidia-smi)"
        )
    sampler = FreeMemorySampler(readers, profile.qualify.sample_ms / 1000)
    sampling = "NVML" if sampler.available else "no physical sampling"
    server = ServerProcess(prepared, port)
    times: dict[str, float] = {}
    done = threading.Event()

    def arm_when_kv_exists() -> None:
        if sampler.armed:
            return
        records = rank_records(run_dir)  # a bad one is reported from the final read
        if len(records) >= ranks and all(r.kv is not None for r in records.values()):
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
    if sampler.error:
        raise EnvironmentProblem(
            f"free-memory sampling stopped during the run ({sampler.error}); the low-water "
            "mark is incomplete: check the GPUs (nvidia-smi) and qualify again"
        )
    unreadable: list[str] = []
    return Boot(
        planned=prepared.planned,
        run_dir=run_dir,
        result=result,
        records=rank_records(run_dir, unreadable.append),
        low_water=dict(sampler.low_water),
        sampled=sampler.available,
        samples=sampler.samples,
        exit_code=code,
        seconds=times,
        unreadable=unreadable,
        driver=driver,
        gpu_kind=run_file.cards.gpu_kind,
    )


def observations(b: Boot) -> list[RankObservation]:
    """Each rank's KV bytes (its blocks x page), low-water free memory and what its worker
    held for serving that the workload never drew. Without physical sampling the low-water
    mark is taken as exactly the safety margin: the size the workers got is what survived."""
    page = b.planned.plan.kv.layout.page_bytes
    margin = b.planned.loaded.profile.memory.safety_margin
    out = []
    for rank, blocks in sorted(b.blocks.items()):
        if b.sampled and rank not in b.low_water:
            raise EnvironmentProblem(
                f"rank {rank} was never sampled (NVML saw {sorted(b.low_water)}); "
                "check CUDA_VISIBLE_DEVICES against hardware.count"
            )
        low = b.low_water[rank] if b.sampled else margin
        record = b.records.get(rank)
        unused = record.unused_hold() if record is not None and b.sampled else 0
        out.append(RankObservation(rank, blocks * page, low, page, unused))
    return out


def _died(server: ServerProcess):
    code = server.proc.returncode if server.proc else None
    return Outcome(-1, False, 0.0, error=f"the server exited ({code}) during the workload")
