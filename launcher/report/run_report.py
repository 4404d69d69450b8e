"""``b12x-launch report RUN_DIR``: the plan of a run against what its workers measured."""

from __future__ import annotations

import math
from io import StringIO
from pathlib import Path
from typing import Any

from launcher import bounded
from launcher.errors import EnvironmentProblem
from launcher.plan import census
from launcher.plan.calibration import read_record
from launcher.plan.planner import ORDER
from launcher.report.vllm_log import parse_kv_lines
from launcher.runfile import (
    ARTIFACT_KEY,
    JSON_MAX,
    ArtifactRecord,
    RankRecord,
    RunFileError,
    artifact_record,
)
from launcher.units import format_size, in_unit, table_unit

LOG_MAX = 64 << 20
"""How much of a vLLM log is read: its last 64 MiB."""


def load_run(run_dir: Path) -> tuple[dict[str, Any], list[RankRecord], list[str]]:
    """The run's plan, its ranks' records (sorted by rank) and warnings (one per record that
    cannot be read, naming it: the report shows the others)."""
    plan_file = run_dir / "plan.json"
    try:
        plan = bounded.read_json(plan_file, JSON_MAX, "plan")
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
    missing = _not_a_plan(plan)
    if missing:
        raise EnvironmentProblem(
            f"{plan_file} is not a b12x-launch plan ({missing}): is {run_dir} a b12x-launch "
            "run? Point report at the directory a launch or --print-command wrote"
        )
    warnings: list[str] = []
    records = [
        r
        for p in sorted(run_dir.glob("measure-rank*.json"))
        if (r := read_record(p, warnings.append)) is not None
    ]
    return plan, sorted(records, key=lambda r: r.rank), warnings


def _not_a_plan(plan: Any) -> str:
    """What the report reads that ``plan`` lacks ("" when it has it all): a JSON file that
    is not a plan is the user's to fix, not a crash."""
    if not isinstance(plan, dict):
        return "not a JSON object"
    ranks = plan.get("ranks")
    if not isinstance(ranks, list) or not ranks:
        return "no ranks"
    for r in ranks:
        components = r.get("components") if isinstance(r, dict) else None
        if not isinstance(components, dict) or not all(
            _number(r.get(k)) for k in ("rank", "total_bytes")
        ):
            return "a rank without its number, total_bytes and components"
        if not all(
            isinstance(c, dict) and _number(c.get("bytes")) and "source" in c
            for c in components.values()
        ):
            return "a component without its bytes and source"
    kv = plan.get("kv")
    if not isinstance(kv, dict) or not all(
        _number(kv.get(k)) for k in ("tokens", "max_concurrency")
    ):
        return "no kv tokens"
    return ""


def _number(value: Any) -> bool:
    """A figure a plan holds: a finite number (JSON's 1e400 reads as infinity, NaN as NaN)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def render_run(run_dir: Path, log_file: Path | None = None) -> str:
    from rich.console import Console
    from rich.table import Table

    plan, records, warnings = load_run(run_dir)
    buf = StringIO()
    console = Console(file=buf, no_color=True, width=120, highlight=False, markup=False)  # data
    for w in warnings:
        console.print(f"warning: {w}")
    unit = table_unit(plan["ranks"][0]["total_bytes"])
    table = Table(
        title=f"Run {run_dir.name}: plan {plan.get('fingerprint', '?')} vs measured",
        title_justify="left",
    )
    table.add_column("COMPONENT")
    table.add_column(f"PLAN ({unit})", justify="right")
    table.add_column("SOURCE")
    for r in records:
        table.add_column(f"RANK {r.rank} ({unit})", justify="right")
    planned = plan["ranks"][0]["components"]
    for name in (*ORDER, "kv_cache"):
        if name not in planned:
            continue
        cells = []
        for r in records:
            value = r.budget.bytes if name == "kv_cache" else r.measured.get(name)
            cells.append(in_unit(value, unit) if value is not None else "-")
        table.add_row(name, in_unit(planned[name]["bytes"], unit), planned[name]["source"], *cells)
    console.print(table)
    for line in _artifact(plan):
        console.print(line)
    kv = plan["kv"]
    for r in records:
        line = f"rank {r.rank}: "
        if r.kv is not None:
            line += f"KV {r.kv.tokens:,} tokens (plan {kv['tokens']:,})"
        else:
            line += "KV cache not allocated yet (the run stopped before, or is still starting)"
        line += f"; {len(r.late_compiles)} late compile(s)"
        console.print(line)
        for entry in r.late_compiles:  # each late kernel, and what the next boot does about it
            if census.well_formed(entry):
                text = census.describe(entry)
            elif isinstance(entry, str):  # an older worker's entry: its text
                text = f"{entry[: census.TEXT_MAX]} (recorded)"
            else:
                text = "an entry no worker wrote (malformed; the next plan ignores it)"
            console.print(f"  late: {text}")
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
                f"{logged.concurrency}x (plan {kv['tokens']:,}, "
                f"{kv['max_concurrency']}x)"
            )
    return buf.getvalue()


def plot_run_dir(run_dir: Path, path: str) -> Path:
    """Draw each rank's plan beside its measurement (``report RUN_DIR --plot FILE``)."""
    from launcher.report.plot import plot_run

    plan, records, _ = load_run(run_dir)
    return plot_run(plan, records, run_dir.name, path)


def _artifact(plan: dict[str, Any]) -> list[str]:
    """The lines on the cache artifact the run restored (none when it was given none)."""
    try:
        record = artifact_record("plan.json", plan.get(ARTIFACT_KEY))
    except RunFileError as exc:
        return [f"warning: {exc}"]
    return artifact_lines(record) if record is not None else []


def artifact_lines(record: ArtifactRecord) -> list[str]:
    """What a launch did with a cache artifact (``--cache-from``), in words: for ``report RUN_DIR``,
    ``prewarm --list`` and the launch's own note."""
    k = record.keys
    head = f"cache artifact {record.artifact_id or '(unread)'} from {record.source}"
    if record.state == "ignored":
        return [f"{head}: ignored, {record.note}"]
    what = {"restored": f"restored in {record.seconds:.1f} s", "present": "already restored"}
    gpu = k.get("gpu_kind", "?")
    if k.get("compute_capability"):
        gpu += f" (compute {k['compute_capability']}, CUDA {k.get('cuda_driver') or '?'})"
    caches = ", ".join(
        f"{name} {_files(c['files'])} {format_size(c['bytes'])}"
        for name, c in record.caches.items()
    )
    ranks = ", ".join(map(str, record.calibration_ranks)) or "none"
    lines = [
        f"{head}: {what.get(record.state, record.state)}; plan {record.fingerprint}, {gpu}, "
        f"build {k.get('build_id', '?')}",
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
    return lines


def _files(n: int) -> str:
    return f"{n:,} file" + ("" if n == 1 else "s")
