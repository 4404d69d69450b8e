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
import time
from pathlib import Path

from launcher import atomic
from launcher.contract import qualified as q
from launcher.contract import store
from launcher.contract.qualified import NAME, QualifiedRecord
from launcher.contract.record import Environment
from launcher.errors import EnvironmentProblem, LauncherError
from launcher.pipeline import make_plan
from launcher.plan.qualified import save_qualified
from launcher.profile import LoadedProfile
from launcher.qualify.boot import Boot, boot, observations
from launcher.qualify.ceiling import NoKvLeft, qualified_kv
from launcher.qualify.client import WorkloadResult
from launcher.qualify.progress import Progress
from launcher.qualify.workload import Workload, worst_case
from launcher.units import format_size


class QualifyFailed(LauncherError):
    """The deployment did not survive its worst case (or the verify boot did not)."""


def qualify(
    loaded: LoadedProfile,
    *,
    run_dir: str | None,
    verify: bool,
    force: bool = False,
    progress: Progress | None = None,
) -> QualifiedRecord:
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
    workload = worst_case(profile, planned.plan.kv.tokens)
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
        record.seconds = round(time.monotonic() - started, 1)
        save_qualified(record, root, profile, planned.fingerprint)
        if not first.on_profiles_cards():
            progress.say(
                f"note: the cards are {first.gpu_kind}, the profile says {profile.hardware.gpu} "
                "(--force): the qualified size is not written to the calibration store"
                + ("; verify, which boots through that store, is skipped" if verify else "")
            )
            verify = False
        kv = record.kv
        progress.say(
            f"qualified {kv.blocks:,} blocks = {kv.tokens:,} tokens "
            f"({format_size(kv.bytes)} per rank; the plan gave "
            f"{first.planned.plan.kv.blocks_per_rank:,} blocks), recorded in {root / NAME}"
        )
        if first.late:
            progress.say(f"warning: {len(first.late)} late compile(s) recorded in the census")
        if verify:
            record = _verify(loaded, root, workload, record, progress, force)
            record.seconds = round(time.monotonic() - started, 1)
            save_qualified(record, root, profile, planned.fingerprint)
    return record


def _record(b: Boot, workload: Workload, margin: int) -> QualifiedRecord:
    kv_plan = b.planned.plan.kv
    layout = kv_plan.layout
    ranks = len(b.planned.plan.ranks)
    if b.unreadable:
        raise QualifyFailed(
            f"{'; '.join(b.unreadable)}: qualify sizes the KV cache from every rank's record"
        )
    if len(b.blocks) < ranks or not all(b.blocks.values()):
        raise QualifyFailed(
            f"{ranks} rank(s) should have written a measurement record with their KV cache "
            f"into {b.run_dir}, found {b.blocks}; is vllm.worker_cls the planned worker (auto)?"
        )
    try:
        ceiling = qualified_kv(observations(b), margin, layout.block_tokens, layout.dcp)
    except NoKvLeft as exc:
        raise QualifyFailed(f"{exc}; lower serving.max_num_seqs or max_model_len") from None
    one_request = layout.blocks_for_tokens(kv_plan.max_model_len)
    if ceiling.blocks < one_request:
        raise QualifyFailed(
            f"the worst case leaves room for {ceiling.blocks:,} KV blocks, fewer than one "
            f"max_model_len request needs ({one_request:,}); lower serving.max_num_seqs or "
            "serving.max_model_len"
        )
    return QualifiedRecord(
        fingerprint=b.planned.fingerprint,
        when=datetime.datetime.now().isoformat(timespec="seconds"),
        profile=b.planned.loaded.profile.name,
        environment=_environment(b),
        kv=q.QualifiedKv(
            blocks=ceiling.blocks,
            tokens=ceiling.tokens,
            bytes=ceiling.kv_bytes,
            page_bytes=layout.page_bytes,
            block_tokens=layout.block_tokens,
            dcp=layout.dcp,
            bounding_rank=ceiling.bounding_rank,
        ),
        planned=q.PlannedKv(blocks=kv_plan.blocks_per_rank, tokens=kv_plan.tokens),
        safety_margin=margin,
        basis=(
            "NVML low-water free memory while the workload ran"
            if b.sampled
            else "no physical sampling (CPU or no NVML): the KV size the workers got, "
            "which survived the workload"
        ),
        ranks=[
            q.RankObserved(
                rank=o.rank,
                kv_bytes=o.kv_bytes,
                low_water_free=o.low_water_free if b.sampled else None,
                headroom=ceiling.headroom[o.rank] if b.sampled else None,
                new_kv_bytes=o.new_kv_bytes(margin),
            )
            for o in observations(b)
        ],
        workload=q.WorkloadSpec.model_validate(workload.to_dict()),
        late_compiles=b.late,
        boots=1,
        qualify_boot=b.summary(),
    )


def _verify(
    loaded: LoadedProfile,
    root: Path,
    workload: Workload,
    record: QualifiedRecord,
    progress: Progress,
    force: bool,
) -> QualifiedRecord:
    """Boot through the next launch's plan (the qualified pin) and run the workload again."""
    planned = make_plan(loaded)
    kv = planned.plan.kv
    if kv.pinned != "qualified" or kv.blocks_per_rank != record.kv.blocks:
        raise QualifyFailed(
            f"the next plan does not pick up the qualified size (pinned {kv.pinned}, "
            f"{kv.blocks_per_rank} blocks); a pin in the profile (memory.kv_tokens or "
            "memory.kv_cache_bytes) takes precedence: remove it"
        )
    try:
        second = boot(planned, root / "verify", workload, progress, "verify", force=force)
    except LauncherError as exc:
        _withdraw(loaded, planned.fingerprint)
        raise QualifyFailed(
            f"the verify boot at the qualified size failed: {exc}; the qualified size is "
            "withdrawn from the calibration store"
        ) from None
    got = set(second.blocks.values())
    passed = second.survived() and not second.unreadable and got == {record.kv.blocks}
    low = min(second.low_water.values()) - record.safety_margin if second.low_water else None
    summary = second.summary()
    verified = q.Verified(
        **{name: getattr(summary, name) for name in type(summary).model_fields},
        passed=passed,
        min_headroom=low,
    )
    record = record.model_copy(update={"boots": 2, "verify": verified})
    if not passed:
        _withdraw(loaded, planned.fingerprint)
        q.write(record, [root / NAME])
        why = (
            _failures(second.result)
            if not second.survived()
            else "; ".join(second.unreadable) or f"KV blocks {sorted(got)}"
        )
        raise QualifyFailed(
            f"the verify boot at the qualified size failed ({why}); the qualified size is "
            f"withdrawn from the calibration store. See {second.run_dir / 'vllm.log'}"
        )
    progress.say(
        "verify passed: the workload ran at the qualified size"
        + (f", lowest headroom above the margin {format_size(low)}" if low is not None else "")
        + (f"; {len(second.late)} late compile(s)" if second.late else "; no late compile")
    )
    return record


def _withdraw(loaded: LoadedProfile, fingerprint: str) -> None:
    store.withdraw_qualified(loaded.profile.runtime.cache_root, fingerprint)


def _write_failure(root: Path, b: Boot, workload: Workload) -> None:
    atomic.write_json(
        root / "qualify-failed.json",
        {"workload_spec": workload.to_dict(), **b.summary().to_json()},
    )


def _failures(result: WorkloadResult) -> str:
    failed = result.failed
    first = failed[0].error if failed else "out of time"
    return f"{len(failed)} of {len(result.outcomes)} requests failed; first: {first[:300]}"


def _environment(b: Boot) -> Environment:
    # No fallback query for a run file without a driver: a CPU run has none, and on GPUs
    # it is what NVML reported a moment before the boot (asking again tells no more).
    kind = b.gpu_kind or b.planned.loaded.profile.hardware.gpu
    return Environment(gpu_kind=kind, driver=b.driver, packages=store.stack_versions())


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
