"""The probes of emitted files, from what this plan's boots measured (issue 67).

The leader's startup budget is the ready time of this plan's last measured boot (the store's
``boots.json``, ``contract/phases.py``) x ``FACTOR``, at least ``FLOOR_S``: a cold boot's for
files that start on fresh nodes, the warm or artifact boot's when ``--cache-from`` seeds the
cache. With no record, the budget stays ``DEFAULT_FAILURES`` x ``PERIOD_S`` (30 minutes).

A worker serves no HTTP: its probe (``launcher.launch.probe``) asks whether its vLLM process
is alive and the leader's rendezvous port answers.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

from launcher.contract import store
from launcher.contract.base import ContractError
from launcher.contract.phases import BOOTS_FILE, BootTimes, read_boots

PERIOD_S = 10
DEFAULT_FAILURES = 180
"""Today's budget without a record: 180 x 10 s = 30 minutes."""
FACTOR = 2.0
"""A boot may take twice what the measured one took (another node's disk, a busy registry)."""
FLOOR_S = 300
"""No budget below 5 minutes: a measured boot of seconds still pulls and starts a pod."""
WORKER_PERIOD_S = 30
WORKER_FAILURES = 3


@dataclass(frozen=True)
class StartupBudget:
    failures: int
    period: int
    why: str
    """Where the figure came from, in words (the files' header says it)."""

    @property
    def seconds(self) -> int:
        return self.failures * self.period

    def describe(self) -> str:
        return f"{self.failures} x {self.period} s = {_minutes(self.seconds)}: {self.why}"


DEFAULT = StartupBudget(DEFAULT_FAILURES, PERIOD_S, "the default, no measured boot of this plan")


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 120 else f"{seconds:.0f} s"


def from_boot(boot: BootTimes) -> StartupBudget:
    seconds = max(FLOOR_S, FACTOR * boot.ready)
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(boot.when))
    why = (
        f"{FACTOR:g} x the {boot.kind} boot of {when} (ready in {boot.ready:.0f} s, build "
        f"{boot.build}), at least {_minutes(FLOOR_S)}"
    )
    return StartupBudget(math.ceil(seconds / PERIOD_S), PERIOD_S, why)


def startup_budget(cache_root: str | Path, fingerprint: str, *, artifact: bool) -> StartupBudget:
    """The leader's startup budget for files whose nodes start cold (``artifact`` False) or
    from a seeded cache: the newest measured boot of that kind in this machine's store."""
    path = store.folder(cache_root, fingerprint) / BOOTS_FILE
    try:
        boots = read_boots(path).boots
    except ContractError as exc:
        return StartupBudget(DEFAULT_FAILURES, PERIOD_S, f"the default ({exc})")
    kinds = ("artifact", "warm") if artifact else ("cold",)
    measured = [b for b in boots if b.kind in kinds]
    if not measured:
        had = ", ".join(sorted({b.kind for b in boots}))
        why = f"{'warm or artifact' if artifact else 'cold'} boot of plan {fingerprint}"
        more = f" (only {had} boots in {path})" if had else f" in {path}"
        return StartupBudget(DEFAULT_FAILURES, PERIOD_S, f"the default, no measured {why}{more}")
    return from_boot(measured[-1])


def worker_check(port: int, leader: str | None = None) -> list[str]:
    """The worker's probe command: its vLLM process alive, the leader's ``port`` answering
    (``leader``: its address; default the pod's ``LWS_LEADER_ADDRESS``)."""
    argv = ["python3", "-m", "launcher.launch.probe", "--port", str(port)]
    return argv + (["--leader", leader] if leader else [])


def k8s_worker(port: int, budget: StartupBudget) -> dict:
    """A worker pod's probes: the startup one as long as the leader's, then liveness (a
    worker whose vLLM died or whose leader is gone restarts, and LWS restarts its group)."""

    def check() -> dict:  # a fresh dict each: YAML would write a shared one as an alias
        return {"exec": {"command": worker_check(port)}, "timeoutSeconds": 10}

    return {
        "startupProbe": {
            **check(),
            "periodSeconds": budget.period,
            "failureThreshold": budget.failures,
        },
        "livenessProbe": {
            **check(),
            "periodSeconds": WORKER_PERIOD_S,
            "failureThreshold": WORKER_FAILURES,
        },
    }


def compose_worker(port: int, leader: str, budget: StartupBudget) -> dict:
    """A headless node's compose health check: the same question, from its shell."""
    return {
        "test": ["CMD", *worker_check(port, leader)],
        "interval": f"{WORKER_PERIOD_S}s",
        "timeout": "10s",
        "retries": WORKER_FAILURES,
        "start_period": f"{budget.seconds}s",
    }
