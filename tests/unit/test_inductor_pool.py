"""Inductor's compile pool for the stage's passes: how many processes a rank gets, and, with
the real torch, that the pool starts, becomes the one Inductor sends kernels to, and is gone
with ``compile_threads`` put back after ``close``."""

from __future__ import annotations

import time

import pytest

from launcher.runtime.prewarm.accelerators.inductor_pool import MOST, InductorPool, processes
from tests.conftest import need_serving


@pytest.mark.parametrize(
    ("asked", "cpus", "ranks", "n"),
    [
        ("auto", 16, 1, MOST),  # one H200 of the tier: capped
        ("auto", 16, 4, 3),  # four ranks share 16 CPUs, one each for the rank itself
        ("auto", 8, 4, 0),  # one process would be no pool
        ("auto", 2, 1, 0),
        ("auto", 16, 2, 7),
        (0, 64, 1, 0),  # off
        (12, 4, 1, 12),  # asked for: as asked
    ],
)
def test_a_rank_gets_its_share_of_the_cpus_or_what_the_profile_asks(asked, cpus, ranks, n):
    assert processes(asked, cpus=cpus, ranks=ranks) == n


def test_a_pool_of_no_processes_touches_nothing():
    pool = InductorPool(0).start()
    assert not pool.ready()
    assert pool.close() == "Inductor's compile pool: off (vLLM's one compile thread)"


def test_the_pool_becomes_inductors_and_is_gone_with_compile_threads_put_back():
    need_serving("torch")
    from torch._inductor import async_compile, config

    config.compile_threads = 1  # as vLLM's env_override leaves it
    pool = InductorPool(2).start()
    assert not pool.error
    deadline = time.monotonic() + 120
    while not pool.ready() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert pool.ready()
    assert config.compile_threads == 2
    assert async_compile.AsyncCompile.use_process_pool()
    (sidecar,) = [p for p in async_compile._pool_set]
    said = pool.close()
    assert pool.ready_after is not None and pool.ready_after > 0
    assert "2 processes, ready" in said and said.endswith("meanwhile; shut down")
    assert config.compile_threads == 1
    assert not async_compile._pool_set
    assert not async_compile.AsyncCompile.use_process_pool()
    process = getattr(sidecar, "process", None)
    if process is not None:  # SubprocPool's sidecar: ended, not left to the worker's exit
        assert process.poll() is not None


def _ctx(profile: str, replay: tuple = (), sets: tuple[str, ...] = ()):
    from launcher.deployment import resolve
    from launcher.plan.model import load_facts
    from launcher.profile import load_profile
    from launcher.runtime.prewarm import PrewarmContext
    from tests.conftest import PROFILES

    p = load_profile(PROFILES / profile, sets).profile
    facts = load_facts(p.model.path, p.model.architecture)
    return PrewarmContext(resolve(p), facts, replay=replay)


def test_a_cuda_boot_gets_its_ranks_share_and_a_replayed_or_cpu_boot_none(monkeypatch):
    from launcher.contract.record import HeldKernel
    from launcher.runtime.prewarm.accelerators import inductor_pool
    from launcher.runtime.prewarm.providers import vllm_warmup

    made = []
    monkeypatch.setattr(inductor_pool.InductorPool, "start", lambda self: made.append(self.n))
    monkeypatch.setattr(inductor_pool.os, "sched_getaffinity", lambda _pid: set(range(16)))
    held = (HeldKernel(kernel="m.k", module="m", qualname="k"),)
    vllm_warmup._inductor_pool(_ctx("glm52.yaml"))  # four cards, 16 CPUs
    vllm_warmup._inductor_pool(_ctx("glm52.yaml", replay=held))
    vllm_warmup._inductor_pool(_ctx("tiny-cpu.yaml"))
    assert made == [3, 0, 0]


def test_the_stage_asks_for_the_pool_the_profile_sets(monkeypatch):
    from launcher.runtime.prewarm.accelerators import inductor_pool
    from launcher.runtime.prewarm.providers import vllm_warmup

    made = []
    monkeypatch.setattr(inductor_pool.InductorPool, "start", lambda self: made.append(self.n))
    monkeypatch.setattr(inductor_pool.os, "sched_getaffinity", lambda _pid: set(range(16)))
    for asked in ("0", "6", "auto"):
        vllm_warmup._inductor_pool(_ctx("glm52.yaml", sets=(f"prewarm.inductor_pool={asked}",)))
    assert made == [0, 6, 3]


def test_a_shutdown_that_fails_is_said_not_hidden(monkeypatch):
    need_serving("torch")
    from torch._inductor import async_compile

    def refuse() -> None:
        raise OSError("the sidecar did not answer")

    pool = InductorPool(2)
    pool.n, pool._before = 2, 1  # as start leaves it, without starting processes
    monkeypatch.setattr(async_compile, "shutdown_compile_workers", refuse)
    said = pool.close()
    assert said == (
        "Inductor's compile pool: 2 processes, not shut down "
        "(shutdown: OSError: the sidecar did not answer)"
    )
