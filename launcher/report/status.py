"""``b12x-launch status RUN_DIR``: a boot's phases, read from its run directory only.

Every process of the launch rewrites its phase file whole at each boundary
(``contract/phases.py``), so this works beside a running server and from another container
on the same volume. A file that is missing, torn, too large or not ours is named among the
problems; the rest is shown.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from launcher.contract.base import ContractError
from launcher.contract.phases import (
    LAUNCHER,
    BootStatus,
    PhaseFile,
    PhaseStatus,
    ProcessStatus,
    read_phases,
)

STUCK_FACTOR = 3.0
"""A phase running past this many times its expected time is flagged as possibly stuck..."""
STUCK_FLOOR_S = 60.0
"""... and past this many seconds: a phase expected to take 2 s is not stuck at 7 s."""
FILES_MAX = 256
"""Phase files read at most (a run directory of a launch has one per rank and one more)."""
_NAME = re.compile(r"^phases-(launcher|rank(\d{1,5}))\.json$")


class NotARunDir(ValueError):
    """The path is no directory that can be read (the message says which and why)."""


def phase_files(run_dir: Path) -> list[Path]:
    """The run directory's phase files: the launcher's first, then the ranks in order."""
    try:
        is_dir, exists = run_dir.is_dir(), run_dir.exists()
    except OSError as exc:  # a name too long, say
        raise NotARunDir(f"{run_dir} cannot be read: {exc.strerror or exc}") from None
    if not is_dir:
        what = "does not exist" if not exists else "is not a directory"
        raise NotARunDir(f"{run_dir} {what}; pass the run directory a launch printed ('run ...')")
    try:
        names = [p.name for p in run_dir.iterdir()]
    except OSError as exc:
        raise NotARunDir(f"{run_dir} cannot be read: {exc.strerror or exc}") from None
    found = [(m, n) for n in names if (m := _NAME.match(n))]
    found.sort(key=lambda mn: -1 if mn[0].group(1) == LAUNCHER else int(mn[0].group(2)))
    return [run_dir / n for _, n in found[:FILES_MAX]]


def read(
    run_dir: Path,
    now: float | None = None,
    *,
    factor: float = STUCK_FACTOR,
    floor: float = STUCK_FLOOR_S,
) -> BootStatus:
    """The boot's status as its files say it now."""
    now = time.time() if now is None else now
    files: list[PhaseFile] = []
    problems: list[str] = []
    for path in phase_files(run_dir):
        try:
            files.append(read_phases(path))
        except ContractError as exc:
            problems.append(str(exc))
    launch = next((f for f in files if f.who == LAUNCHER), None)
    ready_at = next((f.ready_at for f in files if f.ready_at is not None), None)
    start = launch.started if launch else min((f.started for f in files), default=None)
    processes, stuck = [], []
    for f in files:
        expected = launch.expected_all.get(f.who, {}) if launch else {}
        process = _process(f, expected, now, factor, floor)
        processes.append(process)
        stuck += [f"{f.who}: {p.name}" for p in process.phases if p.state == "possibly stuck"]
    return BootStatus(
        run_dir=str(run_dir),
        now=now,
        fingerprint=launch.fingerprint if launch else "",
        boot_kind=launch.boot_kind if launch else None,
        expected_from=launch.expected_from if launch else "",
        ready=round(ready_at - start, 2) if ready_at is not None and start is not None else None,
        elapsed=round((ready_at or now) - start, 2) if start is not None else None,
        slowest=slowest([f for f in files if f.who != LAUNCHER], now),
        stuck=stuck,
        stuck_factor=factor,
        stuck_floor=floor,
        problems=problems,
        processes=processes,
    )


def _process(
    f: PhaseFile, expected: dict[str, float], now: float, factor: float, floor: float
) -> ProcessStatus:
    out: list[PhaseStatus] = []
    alive = None if f.who == LAUNCHER else process_alive(f.host, f.pid)
    for p in f.phases:
        want = p.expected if p.expected is not None else expected.get(p.name)
        elapsed = p.elapsed(now)
        state = "done" if p.ended is not None else "running"
        if state == "running" and alive is False:
            state = "process gone"
        elif state == "running" and want is not None and elapsed > max(factor * want, floor):
            state = "possibly stuck"
        out.append(
            PhaseStatus(
                name=p.name,
                state=state,
                elapsed=round(elapsed, 2),
                expected=want,
                progress=p.progress,
            )
        )
    seen = {p.name for p in f.phases}
    if not f.failed and (
        not f.phases or f.phases[-1].ended is None or f.phases[-1].name != "ready"
    ):
        # what this process has still ahead, as the last boot of the plan went
        out += [
            PhaseStatus(name=n, state="not started", expected=s)
            for n, s in expected.items()
            if n not in seen
        ]
    running = next((p.name for p in f.phases if p.ended is None), None)
    return ProcessStatus(
        who=f.who,
        host=f.host,
        pid=f.pid,
        current=running,
        failed=f.failed,
        alive=alive,
        phases=out,
    )


def process_alive(host: str, pid: int) -> bool | None:
    """Whether ``pid`` runs, when the file is this machine's (None: another's, or unknown).
    A container on the same volume sees other process ids: it does not ask."""
    import os
    import socket

    if not pid or not host or host != socket.gethostname():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: it runs
        return True
    return True


def slowest(ranks: list[PhaseFile], now: float) -> str | None:
    """The rank furthest behind: fewest phases ended, then the longest in its running phase;
    once all have ended, the one that ended last."""
    if len(ranks) < 2:
        return None

    def behind(f: PhaseFile) -> tuple:
        ended = sum(p.ended is not None for p in f.phases)
        running = next((p for p in f.phases if p.ended is None), None)
        last_end = max((p.ended for p in f.phases if p.ended is not None), default=f.started)
        in_phase = now - running.started if running else 0.0
        return (-ended, in_phase, last_end)

    return max(ranks, key=behind).who


def finished(status: BootStatus) -> bool:
    """Nothing more to watch: ready, or every rank failed, ended or is gone."""
    if status.ready is not None:
        return True

    def over(p: ProcessStatus) -> bool:
        ended = p.current is None and any(ph.state == "done" for ph in p.phases)
        return bool(p.failed) or p.alive is False or ended

    if any(p.failed for p in status.processes if p.who == LAUNCHER):
        return True  # the launch stopped before vLLM started (a node never joined)
    ranks = [p for p in status.processes if p.who != LAUNCHER]
    return bool(ranks) and all(over(p) for p in ranks)


def _seconds(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 600:
        return f"{s:.1f}s"
    if s < 3600:
        return f"{int(s // 60)}m{int(s % 60):02d}s"
    return f"{int(s // 3600)}h{int(s % 3600 // 60):02d}m"


def table(status: BootStatus):
    """The status as a rich renderable (a header and one table of every process's phases)."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    head = f"run {status.run_dir}"
    if status.fingerprint:
        head += f", plan {status.fingerprint}"
    if status.boot_kind:
        head += f", {status.boot_kind} boot"
    lines = [Text(head, style="bold")]
    when = (
        f"ready in {_seconds(status.ready)}"
        if status.ready is not None
        else f"booting for {_seconds(status.elapsed)}"
    )
    lines.append(
        Text(
            when
            + (
                f"; expected times from the {status.expected_from}"
                if status.expected_from
                else "; no earlier boot: no expected times"
            )
        )
    )
    if status.slowest:
        lines.append(Text(f"slowest rank: {status.slowest}"))
    for s in status.stuck:
        lines.append(
            Text(
                f"possibly stuck: {s} (past {status.stuck_factor:g}x its expected time and "
                f"{status.stuck_floor:g}s)",
                style="bold red",
            )
        )
    for p in status.problems:
        lines.append(Text(f"unreadable: {p}", style="yellow"))
    t = Table(show_edge=False, pad_edge=False)
    for col in ("PROCESS", "PHASE", "STATE", "ELAPSED", "EXPECTED", "PROGRESS"):
        t.add_column(col, justify="right" if col in ("ELAPSED", "EXPECTED") else "left")
    styles = {
        "running": "cyan",
        "possibly stuck": "bold red",
        "process gone": "bold red",
        "not started": "dim",
    }
    for proc in status.processes:
        for i, ph in enumerate(proc.phases):
            prog = ph.progress
            t.add_row(
                proc.who if i == 0 else "",
                ph.name,
                Text(ph.state, style=styles.get(ph.state, "")),
                _seconds(ph.elapsed),
                _seconds(ph.expected),
                f"{prog.part} {prog.done + 1}/{prog.total}" if prog else "",
            )
        if proc.failed:
            t.add_row(
                proc.who if not proc.phases else "", "failed", Text(proc.failed, "red"), "", "", ""
            )
    if not status.processes:
        lines.append(
            Text(
                "no phases recorded yet (the launch writes them once its run directory exists)",
                style="dim",
            )
        )
    else:
        lines.append(t)
    return Group(*lines)


def show(
    run_dir: Path,
    *,
    watch: bool,
    as_json: bool,
    interval: float = 1.0,
    out=None,
    sleep=time.sleep,
) -> BootStatus:
    """Print the status once, or follow it until the boot is ready (or every rank ended);
    the last status read."""
    import json
    import sys

    out = out or sys.stdout
    if as_json:
        while True:
            status = read(run_dir)
            out.write(json.dumps(status.to_json()) + "\n")
            out.flush()
            if not watch or finished(status):
                return status
            sleep(interval)
    from rich.console import Console

    # soft_wrap: a path or a reason stays on one line however narrow the output
    console = Console(file=out, highlight=False, soft_wrap=True)
    status = read(run_dir)
    if not watch:
        console.print(table(status))
        return status
    from rich.live import Live

    with Live(table(status), console=console, refresh_per_second=4, transient=False) as live:
        while not finished(status):
            sleep(interval)
            status = read(run_dir)
            live.update(table(status))
    return status


def nothing_shown(status: BootStatus) -> str | None:
    """Why nothing could be shown (None: something was)."""
    if status.processes:
        return None
    if status.problems:
        return f"{status.run_dir}: no phase file could be read: {'; '.join(status.problems)}"
    return (
        f"{status.run_dir}: no phases recorded (a launch writes phases-launcher.json there once "
        "its run directory exists; a run of a launcher before issue 67 has none)"
    )
