"""The corpus of odd and hostile inputs over every subcommand and flag: the hand-written cases
(``tests/unit/hostile.py``) and the generated ones (``tests/unit/hostile_space.py``, seeded).

Each case runs in a process of its own (``tests/unit/hostile_run.py``: forked, its own
directory, environment, limits and streams) and is judged from outside it: 0 internal errors,
0 hangs, 0 planted secrets in any output or file written, 0 raw control characters in what it
printed, 0 changes outside the trees the launcher owns (its cache root and run directory; in
an output directory, only what it made), nothing in its sentinel tree changed, every refusal
naming its file or flag, and no command run from an input (issues 41 and 64).

The seed is printed with the counts at the end of the run (``tests/conftest.py``'s summary).
The unit tier runs ``SEED``; ``--hostile-seed N`` (or ``B12X_HOSTILE_SEED=N``) runs another.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import click
import pytest

from launcher.cli import cli
from launcher.terminal import printable
from tests.conftest import PROFILES
from tests.unit import hostile, hostile_space
from tests.unit.hostile_run import Done, Job, changed, outside, run_all, snapshot
from tests.unit.hostile_space import FIFO, SECRET, Link, Sparse

SEED = 64
TIME_LIMIT = 60
"""Seconds one case may run (the slowest take 2 s alone; the pool shares the machine's cores)."""
SCAN_MAX = 64 << 20
ALL_OWNED = (".cache", "cache", "run", "out/b12x-launch-emit.manifest")
"""What the launcher owns whole: its cache root (default and ``{d}/cache``; matplotlib's
cache is put there too), its run dirs and emit's manifest; and what a case names after
``OWNED_BY_FLAG``."""
OWNED_BY_FLAG = ("--plot", "--run-dir")
RAW = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
ENVIRONMENT = ["vLLM is not installed in this environment"]
"""Refusals of this machine (no vLLM in the unit venv), which name no input by design."""
REPORT: dict[str, int | str] = {}
"""The counts, for the run's summary (``tests/conftest.py`` prints them)."""


@dataclass(frozen=True)
class Case:
    name: str
    family: str
    argv: tuple[str, ...]
    files: dict[str, object] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    expect: str = "any"
    names: tuple[str, ...] = ()
    owned: tuple[str, ...] = hostile_space.Generated.__dataclass_fields__["owned"].default

    @property
    def command(self) -> str:
        for word in self.argv:
            if word in hostile_space.COMMANDS:
                return word
        return "launch"


def seed(config: pytest.Config | None = None) -> int:
    given = (config.getoption("hostile_seed", None) if config else None) or os.environ.get(
        "B12X_HOSTILE_SEED"
    )
    return int(given) if given not in (None, "") else SEED


def corpus(n: int) -> list[Case]:
    """The hand-written cases, then the generated ones for seed ``n``."""
    cases = [
        Case(c.name, "hand/" + c.name.split("/")[0], c.argv, c.files, {}, c.expect, c.names)
        for c in hostile.CASES
    ]
    cases += [
        Case(g.name, g.family, g.argv, g.files, g.env, g.expect, (), g.owned)
        for g in hostile_space.generate(cli, n)
    ]
    return cases


def _values() -> dict[str, str]:
    from launcher.plan.fingerprint import profile_fingerprint
    from launcher.profile import load_profile

    glm = PROFILES / "glm52.yaml"
    return {
        "{glm}": str(glm),
        "{tiny}": str(PROFILES / "tiny-cpu.yaml"),
        "{two}": str(PROFILES / "glm52-2node.yaml"),
        "{kimi}": str(PROFILES / "kimi-k2.yaml"),
        "{secret}": SECRET,
        "{fp}": profile_fingerprint(load_profile(glm).profile),
    }


def _fill(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace(key, value)
    return text


def _plant(root: Path, files: dict[str, object], values: dict[str, str]) -> None:
    for rel, content in files.items():
        path = root / _fill(rel, values)
        path.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
        elif content is FIFO:
            os.mkfifo(path)
        elif isinstance(content, Link):
            path.symlink_to(_fill(content.target, values))
        elif isinstance(content, Sparse):
            with path.open("wb") as fh:
                fh.write(content.head)
                fh.truncate(content.size)
        else:
            data = content if isinstance(content, bytes) else _fill(str(content), values).encode()
            path.write_bytes(data)


def _sentinel(path: Path) -> None:
    """What a case may point at and must never change: a file, a tree, an artifact-like dir."""
    (path / "dir").mkdir(parents=True)
    (path / "victim.txt").write_text(hostile_space.VICTIM)
    (path / "dir" / "inner.txt").write_text("inner\n")
    (path / "webapp").mkdir()
    (path / "webapp" / "manifest.json").write_text("{}\n")
    (path / "webapp" / "index.html").write_text("<html></html>\n")


@dataclass
class Prepared:
    case: Case
    root: Path
    sentinel: Path
    argv: list[str]
    values: dict[str, str]
    before: dict
    sentinel_before: dict


@dataclass
class Outcome:
    case: Case
    code: int
    seconds: float
    stdout: str
    stderr: str
    problems: list[str]


def prepare(case: Case, base: Path, values: dict[str, str], number: int) -> tuple[Prepared, Job]:
    root = base / f"c{number:04d}"
    sentinel = base / f"c{number:04d}.s"
    root.mkdir()
    _sentinel(sentinel)
    (root / "bin").mkdir()
    # `touch` alone on PATH: a shell that ever ran an input's `$(touch PWNED)` leaves the file
    (root / "bin" / "touch").symlink_to(shutil.which("touch") or "/usr/bin/touch")
    vals = {**values, "{d}": str(root), "{s}": str(sentinel), "{sname}": sentinel.name}
    _plant(root, case.files, vals)
    argv = [_fill(a, vals) for a in case.argv]
    env = {
        "HOME": str(root),
        "PATH": str(root / "bin"),  # nothing to start: no nvidia-smi, no vllm, no shell
        "CUDA_VISIBLE_DEVICES": "",
        "HF_HUB_OFFLINE": "1",
        "HF_TOKEN": SECRET + "-from-the-environment",
        "VLLM_API_KEY": SECRET + "-api-key-from-the-environment",
        "COLUMNS": "120",
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        "MPLCONFIGDIR": str(root / ".cache" / "matplotlib"),
        **{k: _fill(v, vals) for k, v in case.env.items()},
    }
    streams = base / "streams"
    job = Job(argv, env, root, streams / f"{number}.out", streams / f"{number}.err", TIME_LIMIT)
    prepared = Prepared(case, root, sentinel, argv, vals, snapshot(root), snapshot(sentinel))
    return prepared, job


def _names(p: Prepared) -> list[str]:
    """What a refusal of this case may name: its paths and flags, the files it planted."""
    argv = p.argv
    names = [a for a in argv if a.startswith("-") or "/" in a]
    names += [str(p.root / _fill(rel, p.values).rstrip("/")) for rel in p.case.files]
    names += [os.path.normpath(a) for a in argv if "/" in a]
    names += ["PROFILE", "PROFILES", "RUN_DIR", "OUT_DIR", "OUT", "no such command"]
    names += ["No such option", "extra argument"]
    names += ENVIRONMENT  # what this machine lacks, not what the input got wrong
    names += [_fill(n, p.values) for n in p.case.names]
    names += [printable(n) for n in names] + [repr(n)[1:-1] for n in names]
    return [n for n in names if n]


def judge(p: Prepared, done: Done) -> Outcome:
    out, err = done.stdout, done.stderr
    problems: list[str] = []
    if done.code == 124:
        problems.append("hang")
    elif done.code not in (0, 1, 2, 3):
        problems.append(f"exit {done.code}")
    traceback = "Traceback" in out + err and "--debug" not in p.argv  # --debug: one on purpose
    if "internal error" in err or traceback:
        problems.append("internal error")
    if SECRET in out + err:
        problems.append("secret in the output")
    if RAW.search(out + err):
        problems.append("a raw control character in the output")
    after = snapshot(p.root)
    changes = changed(p.before, after)
    named = [
        os.path.relpath(p.argv[i + 1], p.root)
        for i, a in enumerate(p.argv[:-1])
        if a in OWNED_BY_FLAG and os.path.normpath(p.argv[i + 1]).startswith(str(p.root) + "/")
    ]
    full = [c for c in changes if not outside([c], (*ALL_OWNED, *named))]
    new_only = [c for c in changes if c not in full and not outside([c], p.case.owned)]
    for c in changes:
        if c not in full and (c not in new_only or not c.startswith("made ")):
            problems.append(f"outside the owned trees: {c}")
    sentinel = changed(p.sentinel_before, snapshot(p.sentinel))
    problems += [f"outside the owned trees: sentinel {c}" for c in sentinel]
    for c in changes:
        rel = c.split(" ", 1)[1]
        path = p.root / rel
        if c.startswith("removed") or path.is_symlink() or not path.is_file():
            continue
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            with os.fdopen(fd, "rb") as fh:
                if SECRET.encode() in fh.read(SCAN_MAX):
                    problems.append(f"secret in {rel}")
        except OSError:
            pass
    if done.code == 0 and "--print-command" in p.argv:
        # the printed line, pasted into sh: its words must stay words (no `env` on PATH here,
        # so nothing starts; a substitution that escaped its quotes would run `touch`)
        subprocess.run(
            ["/bin/sh", "-c", out], cwd=p.root, env={"PATH": str(p.root / "bin")},
            capture_output=True, timeout=30,
        )  # fmt: skip
    if any("PWNED" in q.name for q in p.root.rglob("*")):
        problems.append("a command in an input ran")
    if done.code in (1, 2) and not any(n in err for n in _names(p)):
        problems.append("a refusal that names no file or flag")
    wanted = {"ok": (0,), "refused": (1, 2), "no-fit": (3,)}.get(p.case.expect)
    if wanted and done.code not in wanted and done.code != 124:
        problems.append(f"expected {p.case.expect}, exit {done.code}")
    return Outcome(p.case, done.code, done.seconds, out, err, problems)


def run_corpus(cases: list[Case], base: Path) -> list[Outcome]:
    values = _values()
    (base / "streams").mkdir(parents=True, exist_ok=True)
    outcomes: list[Outcome] = []
    prepared: dict[int, Prepared] = {}

    def jobs():
        for number, case in enumerate(cases):
            p, job = prepare(case, base, values, number)
            prepared[number] = p
            yield number, job

    def finish(number, done: Done) -> None:
        outcomes.append(judge(prepared.pop(number), done))

    run_all(jobs(), workers=(os.cpu_count() or 2) + 1, finish=finish)
    return outcomes


def _detail(failed: list[Outcome]) -> str:
    return "\n".join(
        f"{o.case.name} [{o.case.family}]: {', '.join(o.problems)}\n"
        f"    argv: {o.case.argv!r}\n    {(o.stderr or o.stdout).strip()[-400:]}"
        for o in failed
    )


def test_the_corpus_covers_every_subcommand_and_flag(request):
    cases = corpus(seed(request.config))
    assert len(cases) >= 2000, len(cases)
    assert len({c.name for c in cases}) == len(cases), "case names are unique"
    missing = []
    for name, command in cli.commands.items():
        argvs = [c.argv for c in cases if c.command == name]
        if not argvs:
            missing.append(name)
            continue
        for param in command.params:
            if not isinstance(param, click.Option):
                continue
            if not any(o in argv for o in param.opts for argv in argvs):
                missing.append(f"{name} {param.opts[0]}")
    assert not missing, f"no case for: {missing}"


def test_hostile_inputs_cause_no_internal_error_hang_leak_or_change_outside(request, tmp_path):
    n = seed(request.config)
    cases = corpus(n)
    started = time.monotonic()
    outcomes = run_corpus(cases, tmp_path)
    wall = time.monotonic() - started
    kinds = Counter(
        re.sub(r"^(secret in|expected|outside the owned trees).*", r"\1", p)
        for o in outcomes
        for p in o.problems
    )
    REPORT.clear()
    REPORT.update(
        {
            "seed": n,
            "cases": len(outcomes),
            "generated": sum(not o.case.family.startswith("hand/") for o in outcomes),
            "subcommands": len({o.case.command for o in outcomes}),
            "accepted (exit 0)": sum(o.code == 0 for o in outcomes),
            "refused (exit 1 or 2)": sum(o.code in (1, 2) for o in outcomes),
            "did not fit (exit 3)": sum(o.code == 3 for o in outcomes),
            "internal errors": kinds["internal error"],
            "hangs": kinds["hang"],
            "planted secrets found": kinds["secret in"] + kinds["secret in the output"],
            "raw control characters printed": kinds["a raw control character in the output"],
            "changes outside the owned trees": kinds["outside the owned trees"],
            "refusals naming no file or flag": kinds["a refusal that names no file or flag"],
            "commands run from an input": kinds["a command in an input ran"],
            "outcomes other than expected": kinds["expected"],
            "slowest case (ms)": int(1000 * max((o.seconds for o in outcomes), default=0)),
            "wall time (s)": int(wall),
        }
    )
    failed = [o for o in outcomes if o.problems]
    assert not failed, (
        f"{len(failed)} of {len(outcomes)} cases broke the contract:\n{_detail(failed)}"
    )
