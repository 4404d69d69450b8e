"""``b12x-launch report RUN_DIR``: the plan of a run against what its workers measured."""

from __future__ import annotations

import re
from dataclasses import dataclass
from io import StringIO
from pathlib import Path

from launcher import bounded
from launcher.contract import store
from launcher.contract.artifact import ArtifactRecord
from launcher.contract.base import JSON_MAX, ContractError
from launcher.contract.names import ORDER, ComponentName
from launcher.contract.plan import ComponentRecord, PlanRecord
from launcher.contract.record import RankRecord
from launcher.contract.runfile import plan_of
from launcher.errors import EnvironmentProblem
from launcher.report.late_files import counter_line, late_file_lines
from launcher.report.vllm_log import parse_kv_lines
from launcher.units import format_size, in_unit, table_unit
from launcher.vllm.check import downgrade_lines

LOG_MAX = 64 << 20
"""How much of a vLLM log is read: its last 64 MiB."""


@dataclass(frozen=True)
class Run:
    """A run directory as ``report`` reads it."""

    plan: PlanRecord
    artifact: ArtifactRecord | None
    """The cache artifact the launch restored (None: none given, or a plan alone)."""
    records: list[RankRecord]
    """Its ranks' records, sorted by rank."""
    warnings: list[str]
    """One per record that cannot be read, naming it (the report shows the others)."""


def load_run(run_dir: Path) -> Run:
    plan_file = run_dir / "plan.json"
    try:
        data = bounded.read_json(plan_file, JSON_MAX, "plan")
    except FileNotFoundError:
        raise EnvironmentProblem(
            f"{plan_file} not found: is {run_dir} a b12x-launch run?"
        ) from None
    except bounded.TooLarge as exc:
        raise EnvironmentProblem(f"{exc}: is {run_dir} a b12x-launch run?") from None
    except OSError as exc:
        raise EnvironmentProblem(f"cannot read {plan_file}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise EnvironmentProblem(f"{plan_file} is not valid JSON: {exc}") from None
    try:
        plan, artifact = plan_of(data, plan_file)
    except ContractError as exc:
        raise EnvironmentProblem(
            f"{plan_file} is not a b12x-launch plan ({exc.reason}): is {run_dir} a b12x-launch "
            "run? Point report at the directory a launch or --print-command wrote"
        ) from None
    warnings: list[str] = []
    records = [
        r
        for p in sorted(run_dir.glob("measure-rank*.json"))
        if (r := store.read_rank(p, warnings.append)) is not None
        and _this_runs(p, r, plan, warnings.append)
    ]
    return Run(plan, artifact, sorted(records, key=lambda r: r.rank), warnings)


def _this_runs(path: Path, record: RankRecord, plan: PlanRecord, warn) -> bool:
    """Whether ``record`` is this run's: its plan's fingerprint, and the rank its file is named
    for. Any other (copied in, or left by another run) is left out with a warning naming both:
    shown, it would read as this run's measurement."""
    if plan.fingerprint and record.fingerprint != plan.fingerprint:
        warn(
            f"{path}: a record of plan {record.fingerprint}, not of this run's plan "
            f"{plan.fingerprint}: left out"
        )
        return False
    named = re.fullmatch(r"measure-rank(\d+)\.json", path.name)
    if named is None or int(named.group(1)) != record.rank:
        warn(f"{path}: a record of rank {record.rank}, not of the rank its name says: left out")
        return False
    return True


def render_run(run_dir: Path, log_file: Path | None = None) -> str:
    from rich.console import Console
    from rich.table import Table

    run = load_run(run_dir)
    plan, records = run.plan, run.records
    buf = StringIO()
    console = Console(file=buf, no_color=True, width=120, highlight=False, markup=False)  # data
    for w in run.warnings:
        console.print(f"warning: {w}")
    first = plan.ranks[0]
    unit = table_unit(first.total_bytes)
    table = Table(
        title=f"Run {run_dir.name}: plan {plan.fingerprint or '?'} vs measured",
        title_justify="left",
    )
    table.add_column("COMPONENT")
    table.add_column(f"PLAN ({unit})", justify="right")
    table.add_column("SOURCE")
    for r in records:
        table.add_column(f"RANK {r.rank} ({unit})", justify="right")
    for name in (*ORDER, ComponentName.KV_CACHE):
        planned = first.components.get(name)
        if planned is None:
            continue
        cells = []
        for r in records:
            value = r.budget.bytes if name == ComponentName.KV_CACHE else r.measured.get(name)
            cells.append(in_unit(value, unit) if value is not None else "-")
        table.add_row(name, in_unit(planned.bytes, unit), planned.source, *cells)
    console.print(table)
    for line in artifact_lines(run.artifact) if run.artifact is not None else ():
        console.print(line)
    kv = plan.kv
    for r in records:
        line = f"rank {r.rank}: "
        if r.kv is not None:
            line += f"KV {r.kv.tokens:,} tokens (plan {kv.tokens:,})"
        else:
            line += "KV cache not allocated yet (the run stopped before, or is still starting)"
        line += f"; {len(r.late_compiles)} late compile(s)"
        console.print(line)
        free = _free_memory(r, first.components.get(ComponentName.SAFETY_MARGIN))
        if free:
            console.print(f"  free memory: {free}")
        for entry in r.late_compiles:  # each late kernel, and what the next boot does about it
            console.print(f"  late: {entry.describe()}")
        if counters := counter_line(r):  # which counters those counts come from
            console.print(f"  {counters}", soft_wrap=True)
            for line in late_file_lines(r):
                console.print(f"  {line}", soft_wrap=True)
        for line in downgrade_lines(r.internals) if r.internals is not None else ():
            console.print(f"  downgrade: {line}")  # a declared vLLM internal this release lacks
    if not records:
        console.print(
            "no measurement records: the workers never reached sizing "
            "(see the vLLM log for the error)"
        )
    log_file = log_file or (run_dir / "vllm.log")
    if log_file.exists():
        try:
            # the end of a long log holds the KV lines of its last start
            text = bounded.read_tail(log_file, LOG_MAX, "vLLM log").decode(errors="replace")
        except (OSError, bounded.TooLarge) as exc:
            raise EnvironmentProblem(f"cannot read the vLLM log {log_file}: {exc}") from None
        logged = parse_kv_lines(text)
        if logged.tokens is not None:
            console.print(
                f"vLLM logged {logged.tokens:,} KV tokens, concurrency "
                f"{logged.concurrency}x (plan {kv.tokens:,}, {kv.max_concurrency}x)"
            )
    return buf.getvalue()


def plot_run_dir(run_dir: Path, path: str) -> Path:
    """Draw each rank's plan beside its measurement (``report RUN_DIR --plot FILE``)."""
    from launcher.report.plot import plot_run

    run = load_run(run_dir)
    return plot_run(run.plan, run.records, run_dir.name, path)


def _free_memory(record: RankRecord, margin: ComponentRecord | None) -> str:
    """Free device memory after vLLM's warmup and at its lowest while serving, as the worker
    read it, against the safety margin ("" on CPU or before the warmup)."""
    read = {
        what: value
        for what, value in (
            ("after vLLM's warmup", record.free_after_warmup),
            ("lowest while serving", record.serving_low_free),
        )
        if value is not None
    }
    if not read:
        return ""
    text = ", ".join(f"{what} {format_size(value)}" for what, value in read.items())
    held = record.held_for_serving
    dip = record.serving_dip()
    if held is not None and dip is not None:  # the reserves held, and what serving drew
        text += (
            f" (held {format_size(held)} for serving's reserves; serving took {format_size(dip[0])}"
        )
        text += f", torch's segments {format_size(dip[1])} past the hold)" if dip[1] else ")"
    elif dip is not None and dip[1] is not None:  # whose memory serving took
        text += (
            f" (of the {format_size(dip[0])} serving took, torch's segments {format_size(dip[1])})"
        )
    if margin is None:
        return text
    below = ": BELOW IT" if min(read.values()) < margin.bytes else ""
    return f"{text} (safety margin {format_size(margin.bytes)}{below})"


def artifact_lines(record: ArtifactRecord) -> list[str]:
    """What a launch did with a cache artifact (``--cache-from``), in words: for ``report RUN_DIR``,
    ``prewarm --list`` and the launch's own note."""
    k = record.keys
    head = f"cache artifact {record.artifact_id or '(unread)'} from {record.source}"
    if record.state == "ignored":
        return [f"{head}: ignored, {record.note}"]
    what = {"restored": f"restored in {record.seconds:.1f} s", "present": "already restored"}
    gpu = k.gpu_kind if k is not None else "?"
    if k is not None and k.compute_capability:
        gpu += f" (compute {k.compute_capability}, CUDA {k.cuda_driver or '?'})"
    caches = ", ".join(
        f"{name} {_files(c.files)} {format_size(c.bytes)}" for name, c in record.caches.items()
    )
    ranks = ", ".join(map(str, record.calibration_ranks)) or "none"
    lines = [
        f"{head}: {what.get(record.state, record.state)}; plan {record.fingerprint}, {gpu}, "
        f"build {k.build_id if k is not None else '?'}",
        f"  held {_files(record.file_count)}, {format_size(record.total_bytes)}: {caches}",
        f"  calibration records: ranks {ranks}"
        + (", qualified KV size" if record.qualified else "")
        + f", {record.census_entries} census entries",
    ]
    if record.state == "restored":
        lines.append(
            f"  files restored {record.files_restored:,}, already there {record.files_present:,}"
            + (f", the node's own kept {record.files_kept:,}" if record.files_kept else "")
        )
    lines.append(
        "  covers this boot: "
        + ("yes (warm)" if record.warm else "no (not every rank's record, or another plan)")
    )
    if record.note:
        lines.append(f"  note: {record.note}")
    return lines


def _files(n: int) -> str:
    return f"{n:,} file" + ("" if n == 1 else "s")
