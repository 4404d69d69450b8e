"""The rank's record: made at sizing (the plan, what this boot measured, the budget), then
filled by each hook after, and written whole after each step."""

from __future__ import annotations

import datetime
import platform as host

from launcher.contract import store
from launcher.contract.names import ComponentName as Name
from launcher.contract.record import Budget, Environment, Measurement, RankRecord
from launcher.runtime.worker.headroom import Headroom
from launcher.runtime.worker.log import logger
from launcher.runtime.worker.readings import Readings
from launcher.runtime.worker.runplan import RunPlan
from launcher.runtime.worker.snapshot import DeviceSnapshot
from launcher.runtime.worker.stage import Stage


def sized_record(
    run: RunPlan,
    rank: int,
    environment: Environment,
    measured: dict[Name, int],
    vllm_available: int,
    budget: Budget,
    stage: Stage,
) -> RankRecord:
    """The record as it stands when the worker hands vLLM the KV budget."""
    return RankRecord(
        fingerprint=run.fingerprint,
        rank=rank,
        when=datetime.datetime.now().isoformat(timespec="seconds"),
        environment=environment,
        plan={k: c.bytes for k, c in run.rank(rank).components.items()},
        measured=measured,
        vllm_available=vllm_available,
        budget=budget,
        prewarm=stage.outcomes(),
        prewarm_seconds=stage.seconds(),
        prewarm_measurement=stage.measurement,
        # What earlier boots learned stays learned: a boot that replayed it compiles
        # nothing late, and without this the next plan would forget it (seen on the H200:
        # the boot after a clean one compiled the replayed kernel late again).
        learned=list(run.rank(rank).learned),
    )


def measured(
    run: RunPlan,
    rank: int,
    before: DeviceSnapshot | None,
    after: DeviceSnapshot | None,
    measurement: Measurement | None,
    headroom: Headroom,
    activation: int | None,
) -> dict[Name, int]:
    """This rank's components as measured, closing the loop with the plan.

    Everything the engine holds after vLLM's profile (free at launch, as the launcher
    read it per card, minus free now) is split into weights (torch's allocation after
    loading), what the prewarm kept (workspaces) and the rest (cuda_context: context,
    cuBLAS, NCCL and whatever the profile run kept outside torch). A calibrated plan
    made of these figures then equals the budget this worker returns, to the block.
    ``activation``: the activation peak when measured or read (None, or 0 unprobed: none).
    """
    out: dict[Name, int] = {}
    if headroom.measured is not None:
        out[Name.JIT_HEADROOM] = headroom.measured
    retained = max(0, measurement.retained_bytes) if measurement is not None else 0
    if measurement is not None:
        out[Name.WORKSPACES] = retained
    if before is not None and after is not None:
        plan = run.rank(rank)
        launch_free = plan.total_bytes - plan.bytes(Name.OTHER_PROCESSES)
        out[Name.WEIGHTS] = before.torch_allocated
        engine = launch_free - after.free
        out[Name.CUDA_CONTEXT] = max(0, engine - before.torch_allocated - retained)
    if activation is not None:
        out[Name.ACTIVATION_PEAK] = activation
    return out


def environment(run: RunPlan, platform: str, device: int | None) -> Environment:
    # The cards' kind: under --force it is not the profile's, and the records must not
    # calibrate the profile's own cards.
    kind = run.file.cards.gpu_kind or run.profile.hardware.gpu
    packages = store.stack_versions()
    if platform != "cuda":
        return Environment(gpu_kind=kind, host=host.node(), packages=packages)
    import torch

    return Environment(
        gpu_kind=kind,
        host=host.node(),
        gpu=torch.cuda.get_device_name(device),
        cuda=torch.version.cuda,
        driver=run.driver,  # read by the launcher on the cards, via the run file
        packages=packages,
    )


def save(record: RankRecord, run: RunPlan, rank: int, vllm: Readings) -> None:
    """Write the record whole, with the live reads' downgrades; a write that fails is said
    and the boot goes on."""
    record.internals = vllm.into(record.internals)
    try:
        store.save_record(record, run.run_dir, run.cache_root, run.profile.hardware.gpu)
    except (OSError, ValueError, TypeError) as exc:
        # The record is what the next plan learns from, not what this boot serves with: a
        # record that cannot be written (a full disk, a value of no JSON form) is logged
        # loudly and the boot goes on, as plain vLLM would (issue 39: never a crash).
        logger.error(
            "b12x-launch rank %d: cannot write the measurement record, so the next plan "
            "will not learn from this boot: %s: %s",
            rank,
            type(exc).__name__,
            exc,
        )
