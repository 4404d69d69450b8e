"""The corpus of odd and hostile inputs (``tests/unit/hostile.py``), over every subcommand and
flag: 0 internal errors, 0 hangs, 0 planted secrets in any output or written file, every
refusal naming its file or flag, and no command run from an input (issue 41). The counts are
printed at the end of the run (``tests/conftest.py``'s summary), as ``.ci/run`` shows them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import click

from launcher.cli import cli
from tests.conftest import PROFILES, run_cli
from tests.unit.hostile import CASES, FIFO, SECRET, Case, Link

TOUCH = shutil.which("touch") or "/usr/bin/touch"
TIME_LIMIT = 90
"""Seconds one case may run (the slowest take 2 s alone; the pool shares the machine's cores)."""
SCAN_MAX = 64 << 20
REPORT: dict[str, int] = {}
"""The counts, for the run's summary (``tests/conftest.py`` prints them)."""


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


@dataclass
class Outcome:
    case: Case
    code: int
    stdout: str
    stderr: str
    problems: list[str]


def _plant(root: Path, case: Case, values: dict[str, str]) -> dict[Path, bytes]:
    """Write the case's files; return what each regular file held (to tell written ones)."""
    held: dict[Path, bytes] = {}
    for rel, content in case.files.items():
        path = root / _fill(rel, values)
        path.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
        elif content is FIFO:
            os.mkfifo(path)
        elif isinstance(content, Link):
            path.symlink_to(_fill(content.target, values))
        else:
            data = content if isinstance(content, bytes) else _fill(str(content), values).encode()
            path.write_bytes(data)
            held[path] = data
    return held


def _written(root: Path, held: dict[Path, bytes]) -> list[Path]:
    """Regular files under ``root`` the run made or changed (links are not followed)."""
    out = []
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            if path.is_symlink() or not path.is_file():
                continue
            if path not in held or path.read_bytes() != held[path]:
                out.append(path)
    return out


def _names(case: Case, argv: list[str], root: Path, values: dict[str, str]) -> list[str]:
    """What a refusal of this case may name: its paths and flags, the files it planted."""
    names = [a for a in argv if a.startswith("-") or "/" in a]
    names += [str(root / _fill(rel, values).rstrip("/")) for rel in case.files]
    names += [os.path.normpath(a) for a in argv if "/" in a]
    names += ["PROFILE", "PROFILES", "RUN_DIR", "OUT_DIR", "no such command", "No such option"]
    names += [f"extra argument ({a})" for a in argv]
    names += [_fill(n, values) for n in case.names]
    return [n for n in names if n]


def run_case(case: Case, base: Path, values: dict[str, str], number: int) -> Outcome:
    root = base / f"case{number:03d}"
    root.mkdir()
    (root / "bin").mkdir()
    # `touch` alone on PATH: a shell that ever ran an input's `$(touch PWNED)` leaves the file
    (root / "bin" / "touch").symlink_to(TOUCH)
    vals = {**values, "{d}": str(root)}
    held = _plant(root, case, vals)
    argv = [_fill(a, vals) for a in case.argv]
    env = {
        "HOME": str(root),
        "PATH": str(root / "bin"),  # nothing to start: no nvidia-smi, no vllm, no shell
        "CUDA_VISIBLE_DEVICES": "",
        "HF_HUB_OFFLINE": "1",
        "HF_TOKEN": SECRET + "-from-the-environment",
        "VLLM_API_KEY": SECRET + "-api-key-from-the-environment",
        "COLUMNS": "120",
    }
    done = run_cli(argv, timeout=TIME_LIMIT, env=env, cwd=root)
    out, err = done.stdout or "", done.stderr or ""
    problems: list[str] = []
    if done.returncode == 124:
        problems.append("hang")
    elif done.returncode not in (0, 1, 2, 3):
        problems.append(f"exit {done.returncode}")
    traceback = "Traceback" in out + err and "--debug" not in argv  # --debug: one on purpose
    if "internal error" in err or traceback:
        problems.append("internal error")
    if SECRET in out + err:
        problems.append("secret in the output")
    for path in _written(root, held):
        with path.open("rb") as fh:
            if SECRET.encode() in fh.read(SCAN_MAX):
                problems.append(f"secret in {path.relative_to(root)}")
    if done.returncode == 0 and "--print-command" in argv:
        # the printed line, pasted into sh: its words must stay words (no `env` on PATH here,
        # so nothing starts; a substitution that escaped its quotes would run `touch`)
        subprocess.run(
            ["/bin/sh", "-c", out], cwd=root, env={"PATH": str(root / "bin")},
            capture_output=True, timeout=30,
        )  # fmt: skip
    if any("PWNED" in p.name for p in root.rglob("*")):
        problems.append("a command in an input ran")
    if done.returncode in (1, 2) and not any(n in err for n in _names(case, argv, root, vals)):
        problems.append("a refusal that names no file or flag")
    wanted = {"ok": (0,), "refused": (1, 2), "no-fit": (3,)}.get(case.expect)
    if wanted and done.returncode not in wanted and done.returncode != 124:
        problems.append(f"expected {case.expect}, exit {done.returncode}")
    return Outcome(case, done.returncode, out, err, problems)


def test_the_corpus_covers_every_subcommand_and_flag():
    assert len(CASES) >= 300, len(CASES)
    assert len({c.name for c in CASES}) == len(CASES), "case names are unique"
    missing = []
    for name, command in cli.commands.items():
        argvs = [c.argv for c in CASES if c.command == name]
        if not argvs:
            missing.append(name)
            continue
        for param in command.params:
            if not isinstance(param, click.Option):
                continue
            if not any(o in argv for o in param.opts for argv in argvs):
                missing.append(f"{name} {param.opts[0]}")
    assert not missing, f"no case for: {missing}"


def test_hostile_inputs_cause_no_internal_error_hang_or_leak(tmp_path):
    values = _values()
    workers = max(4, 2 * (os.cpu_count() or 2))
    with ThreadPoolExecutor(workers) as pool:
        outcomes = list(
            pool.map(lambda nc: run_case(nc[1], tmp_path, values, nc[0]), enumerate(CASES))
        )
    kinds = Counter(
        re.sub(r"^(secret in|expected).*", r"\1", p) for o in outcomes for p in o.problems
    )
    REPORT.clear()
    REPORT.update(
        {
            "cases": len(outcomes),
            "subcommands": len({o.case.command for o in outcomes}),
            "accepted (exit 0)": sum(o.code == 0 for o in outcomes),
            "refused (exit 1 or 2)": sum(o.code in (1, 2) for o in outcomes),
            "did not fit (exit 3)": sum(o.code == 3 for o in outcomes),
            "internal errors": kinds["internal error"],
            "hangs": kinds["hang"],
            "planted secrets found": kinds["secret in"] + kinds["secret in the output"],
            "refusals naming no file or flag": kinds["a refusal that names no file or flag"],
            "commands run from an input": kinds["a command in an input ran"],
            "outcomes other than expected": kinds["expected"],
        }
    )
    failed = [o for o in outcomes if o.problems]
    detail = "\n".join(
        f"{o.case.name}: {', '.join(o.problems)}\n    {(o.stderr or o.stdout).strip()[-600:]}"
        for o in failed
    )
    assert not failed, f"{len(failed)} of {len(outcomes)} cases broke the contract:\n{detail}"
