"""Running the hostile corpus: each case in a process of its own, checked from outside it.

A case is forked from this process, which has the launcher imported already: a case costs its
own work (tens of milliseconds), not an interpreter's start (a third of a second), so two
thousand fit in the unit tier on two cores. The child is as isolated as a fresh process where
it matters: its own working directory, environment (no program on ``PATH``), address-space
limit, session (killed whole past its time) and standard streams (files, read afterwards).

What a case did is judged here, in the parent, not by the code under test: the case's
directory and its sentinel tree (a sibling the case may point at by ``..``, an absolute path
or a link, and must never change) are snapshotted before and after: every entry's name, type,
size, mode, mtime and content hash, or a link's target.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import resource
import signal
import stat
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

MEMORY_LIMIT = 4 << 30
"""Address space a case may take: a reader that never stops fails with MemoryError."""
HASH_WHOLE = 4 << 20
"""Files up to this size are hashed whole; larger ones (sparse, planted past a limit) by their
first and last MiB, with size, inode and mtime."""

Entry = tuple[str, int, int, int, str]
"""(type, size, mode, mtime_ns, digest or link target)."""


def _digest(path: Path, size: int) -> str:
    h = hashlib.sha256()
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError as exc:
        return f"unreadable {exc.errno}"
    with os.fdopen(fd, "rb") as fh:
        if size <= HASH_WHOLE:
            h.update(fh.read())
        else:
            h.update(fh.read(1 << 20))
            fh.seek(size - (1 << 20))
            h.update(fh.read())
    return h.hexdigest()


def snapshot(root: Path) -> dict[str, Entry]:
    """Every entry under ``root`` (``root`` itself as ``.``), links not followed."""
    out: dict[str, Entry] = {}
    if not root.exists() and not root.is_symlink():
        return out
    stack = [root]
    while stack:
        path = stack.pop()
        try:
            info = path.lstat()
        except OSError:
            continue
        rel = path.relative_to(root).as_posix()
        mode = info.st_mode
        if stat.S_ISLNK(mode):
            out[rel] = ("link", 0, 0, 0, os.readlink(path))
        elif stat.S_ISDIR(mode):
            out[rel] = ("dir", 0, stat.S_IMODE(mode), 0, "")
            with contextlib.suppress(OSError):
                stack.extend(path.iterdir())
        elif stat.S_ISREG(mode):
            tag = _digest(path, info.st_size) if info.st_size <= HASH_WHOLE else ""
            if not tag:
                tag = f"{info.st_ino}:{_digest(path, info.st_size)}"
            out[rel] = ("file", info.st_size, stat.S_IMODE(mode), info.st_mtime_ns, tag)
        else:
            out[rel] = ("special", 0, stat.S_IMODE(mode), info.st_mtime_ns, str(stat.S_IFMT(mode)))
    return out


def changed(before: dict[str, Entry], after: dict[str, Entry]) -> list[str]:
    """Entries made, removed or changed (a directory's mtime alone is no change: its entries
    say what happened in it)."""
    out = []
    for rel in sorted(before.keys() | after.keys()):
        a, b = before.get(rel), after.get(rel)
        if a == b:
            continue
        if a is None:
            out.append(f"made {rel}")
        elif b is None:
            out.append(f"removed {rel}")
        else:
            out.append(f"changed {rel}")
    return out


def outside(changes: Iterable[str], owned: Iterable[str]) -> list[str]:
    """The changes to entries in none of the ``owned`` trees (paths relative to the root)."""
    trees = [o.strip("/") for o in owned]

    def inside(rel: str) -> bool:
        return any(rel == t or rel.startswith(t + "/") for t in trees)

    return [c for c in changes if not inside(c.split(" ", 1)[1])]


@dataclass
class Done:
    code: int
    """The exit code; 124 past the time limit."""
    stdout: str
    stderr: str
    seconds: float


def _child(argv: list[str], env: dict[str, str], cwd: Path, out: Path, err: Path) -> None:
    """In the forked child: become a fresh ``b12x-launch ARGV`` and exit with its code."""
    code = 70
    try:
        os.setsid()
        for sig in (signal.SIGALRM, signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        signal.setitimer(signal.ITIMER_REAL, 0)
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 1)
        os.dup2(os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 2)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), "utf-8", "replace")
        sys.stderr = io.TextIOWrapper(
            io.FileIO(2, "w", closefd=False), "utf-8", "backslashreplace", line_buffering=True
        )
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        from launcher.cli import cli

        try:
            cli.main(args=argv, prog_name="b12x-launch", standalone_mode=True)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # as Python ends on an uncaught exception: its traceback, exit 1
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()
        os._exit(code)


@dataclass
class Job:
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    out: Path
    err: Path
    timeout: float
    pid: int = 0
    started: float = 0.0


def run_all(
    jobs: Iterable[tuple[object, Job]],
    workers: int,
    finish: Callable[[object, Done], None],
) -> None:
    """Fork each job, at most ``workers`` at once; ``finish(key, done)`` as each ends. A job
    past its ``timeout`` is killed with its whole session (code 124)."""
    pending = iter(jobs)
    running: dict[int, tuple[object, Job]] = {}
    more = True
    while more or running:
        while more and len(running) < workers:
            try:
                key, job = next(pending)
            except StopIteration:
                more = False
                break
            sys.stdout.flush()
            sys.stderr.flush()
            job.started = time.monotonic()
            pid = os.fork()
            if pid == 0:
                _child(job.argv, job.env, job.cwd, job.out, job.err)
            job.pid = pid
            running[pid] = (key, job)
        ended = []
        for pid, (_, job) in running.items():
            done_pid, status = os.waitpid(pid, os.WNOHANG)
            if done_pid:
                ended.append((pid, os.waitstatus_to_exitcode(status)))
            elif time.monotonic() - job.started > job.timeout:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                ended.append((pid, 124))
        for pid, code in ended:
            key, job = running.pop(pid)
            seconds = time.monotonic() - job.started
            if code < 0:  # killed by a signal (the memory limit's SIGKILL, a SIGSEGV)
                code = 128 - code
            text = [p.read_text(errors="replace") if p.exists() else "" for p in (job.out, job.err)]
            finish(key, Done(code, text[0], text[1], seconds))
        if not ended:
            time.sleep(0.002)
