"""The stage thread's sampler: each sample filed under the place its innermost known frame
belongs to, else under the innermost function; the sampler ends with its block."""

import re
import sys
import threading
import time
import types

from launcher.runtime.prewarm.diagnostics import compile_times, thread_samples


def _function_in(path: str, name: str, body: str) -> types.FunctionType:
    """A function whose frames say they run in ``path`` (as a package's file would)."""
    code = compile(f"def {name}(work):\n    {body}\n", path, "exec")
    scope: dict = {}
    exec(code, scope)
    return scope[name]


def test_a_sample_is_filed_under_its_innermost_known_place_else_its_function():
    inductor = _function_in("/venv/site-packages/torch/_inductor/codecache.py", "load", "work()")
    triton = _function_in("/venv/site-packages/triton/compiler/compiler.py", "compile", "work()")
    frames: list = []

    def here():
        frames.append(sys._getframe())

    inductor(lambda: triton(here))  # Triton compiling under Inductor: the innermost place wins
    assert thread_samples.place(frames[-1]) == "Triton compiling"
    inductor(here)
    assert thread_samples.place(frames[-1]) == "Inductor compiling"
    runner = _function_in(
        "/venv/site-packages/vllm/v1/worker/gpu_model_runner.py", "_update_states", "work()"
    )
    runner(lambda: frames.append(sys._getframe(1)))
    assert thread_samples.place(frames[-1]) == "v1/worker/gpu_model_runner.py:_update_states"


def test_the_sampler_sees_what_the_thread_does_and_ends_with_stop():
    busy = _function_in(
        "/venv/site-packages/torch/_dynamo/convert_frame.py", "trace", "time.sleep(0.3)"
    )
    busy.__globals__["time"] = time
    thread_samples.mark("a pass with no sampler running")  # not this sampler's phase
    sampler = thread_samples.Sampler(threading.get_ident(), interval=0.01).start()
    busy(None)
    samples = sampler.stop()
    names = [name for _, name, _ in samples.taken]
    assert names.count("Dynamo") >= 0.6 * len(names) and len(names) >= 10
    line = samples.describe()
    assert line.startswith(f"thread samples: {len(names)} over ") and "Dynamo " in line
    assert re.search(r"; by 10s window: \+0s 0\.\ds Dynamo \d+%$", line), line
    assert not any(t.name == "b12x-samples" for t in threading.enumerate())


def test_the_compile_timer_samples_its_thread_too():
    with compile_times.timed() as compiles:
        time.sleep(0.1)
    assert compiles.samples is not None and compiles.samples.thread == threading.get_ident()
    assert compiles.samples.taken


def test_triton_s_runtime_is_told_apart_by_what_it_does():
    """The samples of 2026-12-03 put 18-22% under one "Triton launching": waiting for a compile
    thread, loading a module or building its launcher, and autotuning are told apart now."""
    frames: list = []

    def here(work):
        frames.append(sys._getframe(1))

    for path, name in (
        ("triton/runtime/_async_compile.py", "waiting for a Triton compile thread"),
        ("triton/backends/nvidia/driver.py", "Triton loading (module, launcher)"),
        ("triton/runtime/autotuner.py", "Triton autotuning"),
        ("triton/runtime/jit.py", "Triton launching (binder, key)"),
    ):
        _function_in(f"/venv/site-packages/{path}", "inner", "work(None)")(here)
        assert thread_samples.place(frames[-1]) == name, path


def test_samples_are_told_by_the_phase_the_stage_marked_with_its_time():
    """Per wave and entry point, where the time went: the 10 s windows of 2026-12-03 could not
    say which wave spent it."""
    tracing = _function_in("/venv/site-packages/torch/_dynamo/convert_frame.py", "trace", "work()")
    sampler = thread_samples.Sampler(threading.get_ident(), interval=0.01).start()
    thread_samples.mark("moe_token_buckets")
    tracing(lambda: time.sleep(0.2))
    thread_samples.mark("wave 0")
    time.sleep(0.2)
    samples = sampler.stop()
    line = samples.describe()
    _, _, phases = line.partition("; by phase: ")
    first, second = phases.split("; ")
    assert first.startswith("moe_token_buckets 0.") and "Dynamo " in first
    assert second.startswith("wave 0 0.") and "test_thread_samples.py:" in second
    assert {phase for _, _, phase in samples.taken} <= {"", "moe_token_buckets", "wave 0"}
    assert thread_samples._phase == ""  # the next sampler starts unmarked
