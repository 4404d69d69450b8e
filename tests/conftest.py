from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROFILES = ROOT / "profiles"


@pytest.fixture
def write(tmp_path: Path):
    """Write a file under tmp_path and return its path."""

    def _write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path

    return _write


# The shipped GLM-5.2 profile's chunk and prompt-logprob refusal: with its transients planned,
# a 131K request has room.
MINIMAL = """\
model:
  path: /nonexistent/model
  architecture: glm-5.2
  quantization: exl3
  bits_per_weight: 3.42
hardware:
  gpu: rtx-pro-6000
  count: 4
parallel:
  tensor: 4
  decode_context: 4
speculative:
  method: mtp
  tokens: 3
serving:
  max_model_len: 131072
  kv_cache_dtype: nvfp4_ds_mla
  max_num_batched_tokens: 3072
  prompt_logprobs: refuse
vllm:
  attention_backend: B12X_MLA_SPARSE
"""


# ---------------------------------------------------------------- tiers asked for


def gathered(loaded, **kwargs):
    """``gather`` with the profile's own deployment, resolved here as ``make_plan`` does."""
    from launcher.deployment import resolve
    from launcher.plan.inputs import gather

    return gather(loaded, resolve(loaded.profile), **kwargs)


REQUIRED_TIERS = "BLAUNCH_TEST_REQUIRE"
"""Comma-separated tiers the command asked for (tests/run sets it): in those, a missing
dependency fails the test instead of skipping it."""
TIERS = ("unit", "integration", "gpu", "container")
"""Test directories. A ``need`` may also name a condition outside them that a run can ask for:
``cluster`` (a LeaderWorkerSet cluster on 127.0.0.1), ``gpu2`` (two GPUs), ``gpu-idle`` (a card
held by no ballast)."""


def required(tier: str) -> bool:
    return tier in os.environ.get(REQUIRED_TIERS, "").split(",")


def need(tier: str, ok: bool, why: str) -> None:
    """Skip a test whose tier cannot run here, unless that tier was asked for: then fail."""
    if ok:
        return
    if required(tier):
        pytest.fail(f"the {tier} tier was asked for and cannot run: {why}", pytrace=False)
    pytest.skip(why, allow_module_level=True)


def need_module(tier: str, module: str, why: str):
    """``pytest.importorskip`` that fails in a tier asked for."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        need(tier, False, f"{why} ({exc})")


def need_serving(module: str):
    """A package of the serving side (torch, triton, vLLM, b12x), which tests/run installs for
    the integration tier: a unit test that needs one fails when that tier was asked for."""
    return need_module("integration", module, "tests/run installs it for the integration tier")


def fake_allocator(monkeypatch, state: dict[str, int]) -> None:
    """torch.cuda's allocator counters read from ``state`` (``allocated``, ``peak``,
    ``reserved``, ``reserved_peak``) as it stands at each call; synchronising and resetting
    the peaks do nothing."""
    import torch

    for name, key in (
        ("memory_allocated", "allocated"),
        ("max_memory_allocated", "peak"),
        ("memory_reserved", "reserved"),
        ("max_memory_reserved", "reserved_peak"),
    ):
        monkeypatch.setattr(torch.cuda, name, lambda device=None, key=key: state[key])
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda device=None: None)


def _tier_of(nodeid: str) -> str:
    parts = nodeid.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" and parts[1] in TIERS else "other"


_MISSING = re.compile(r"(?:ModuleNotFoundError|ImportError): No module named '([\w.]+)'")
SERVING_STACK = frozenset(
    (
        "torch",
        "triton",
        "vllm",
        "b12x",
        "tokenizers",
        "transformers",
        "cupy",
        "pynvml",
        "flashinfer",
    )
)
"""The serving side's packages (the GPU kit's, and the integration tier's that tests/run
installs): the only ones whose absence may turn a module of a tier not asked for into a skip."""


def _missing_package(longrepr: str) -> str | None:
    """The serving package a failed import lacks; None for any other failure (a module of our
    own, a test extra, a typo, a name a module does not define, a module an installed serving
    package does not have): that is a broken test file."""
    missing = _MISSING.search(longrepr)
    name = missing.group(1) if missing else ""
    # A package that is absent is named whole; ``vllm.v1.x`` names a module an installed
    # vLLM does not have (moved upstream): that is a break, not an absence.
    return name if name in SERVING_STACK else None


def pytest_addoption(parser):
    parser.addoption(
        "--hostile-seed",
        dest="hostile_seed",
        default=None,
        help="the seed of the generated hostile corpus (tests/unit/hostile_space.py)",
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """A test file of a tier not asked for whose imports need a serving package this machine
    lacks (``tests/gpu``'s generated models need ``tokenizers``, which vLLM brings) is skipped,
    with the package named, instead of failing the collection of every other tier. Any other
    import failure stays an error in every run (a broken ``tests/gpu`` module must not pass
    for a missing GPU), and so does every one in a tier asked for."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed or not isinstance(collector, pytest.Module):
        return
    tier = _tier_of(os.path.relpath(collector.path, ROOT))
    missing = _missing_package(str(report.longrepr))
    if tier in TIERS and not required(tier) and missing:
        report.outcome = "skipped"
        why = f"the {tier} tier needs {missing}, not installed here (tier not asked for)"
        report.longrepr = (str(collector.path), None, f"Skipped: {why}")


def pytest_terminal_summary(terminalreporter):
    """Per tier: ran, failed, skipped and the first reason a tier skipped (a tier that did not
    run must say so at the end, not hide in a count)."""
    counts: dict[str, dict[str, int]] = {}
    reasons: dict[str, str] = {}
    for status in ("passed", "failed", "error", "skipped"):
        for report in terminalreporter.stats.get(status, []):
            nodeid = getattr(report, "nodeid", "")
            if not nodeid:
                continue
            tier = _tier_of(nodeid)
            row = counts.setdefault(tier, {"passed": 0, "failed": 0, "skipped": 0})
            row["failed" if status == "error" else status] += 1
            if status == "skipped" and tier not in reasons:
                longrepr = getattr(report, "longrepr", None)
                reasons[tier] = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    corpus = sys.modules.get("tests.unit.test_hostile_inputs")
    if corpus is not None and corpus.REPORT:
        terminalreporter.write_sep("-", "hostile inputs (tests/unit/hostile.py, hostile_space.py)")
        for what, count in corpus.REPORT.items():
            terminalreporter.write_line(f"{what:<36} {count:>5}")
    if not counts:
        return
    terminalreporter.write_sep("-", "tiers")
    asked = os.environ.get(REQUIRED_TIERS, "")
    for tier in sorted(counts):
        row = counts[tier]
        line = f"{tier:<12} ran {row['passed'] + row['failed']:>4} (failed {row['failed']})"
        line += f", skipped {row['skipped']:>3}"
        if row["skipped"] and reasons.get(tier):
            line += f": {reasons[tier][:110]}"
        terminalreporter.write_line(line)
    terminalreporter.write_line(f"tiers asked for: {asked or 'none named'}")


class Overtime(BaseException):
    """Raised in the main thread when a ``deadline`` passes: a BaseException, so no
    ``except Exception`` on the way (the CLI's internal-error handler) swallows it."""


@contextlib.contextmanager
def deadline(seconds: float):
    """Fail the code in the block if it runs longer than ``seconds`` (a hang becomes a test
    failure instead of a stuck run). Main thread only (SIGALRM)."""

    def _fire(signum, frame):
        raise Overtime(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, _fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


MEMORY_LIMIT = 4 << 30
"""Address space a CLI run in a subprocess may take: a reader that never stops (``/dev/zero``)
fails there with MemoryError instead of taking the machine's memory."""


def _limit_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def run_cli(
    args: list[str], *, timeout: float = 30, env: dict[str, str] | None = None, cwd=None
) -> subprocess.CompletedProcess:
    """``b12x-launch ARGS`` in a subprocess of this interpreter (this checkout's package), under
    a time and a memory limit; a run past ``timeout`` returns code 124 with what it printed."""
    command = [sys.executable, "-m", "launcher", *args]
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", **(env or {})}
    try:
        return subprocess.run(
            command,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            env=full_env,
            cwd=cwd or ROOT,
            preexec_fn=_limit_memory,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else exc.stdout
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else exc.stderr
        return subprocess.CompletedProcess(command, 124, out or "", err or "")
