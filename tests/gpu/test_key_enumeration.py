"""Key enumeration on a real GPU: what the enumeration compiles, serving finds compiled.

A kernel launched with a few argument classes; the keys provider's enumeration then
compiles every key the deployment reaches, without launching; launches in the other classes
afterwards compile nothing (the late-JIT watchdog armed, as after sizing)."""

from __future__ import annotations

import pytest

from launcher.runtime import jit_watch
from launcher.runtime.prewarm.providers import keys

pytestmark = pytest.mark.gpu


def test_every_enumerated_key_is_found_compiled_by_a_later_launch(cuda_device):
    import torch

    from tests.gpu.keys_kernel import masked_rows

    dev = f"cuda:{cuda_device}"
    out = torch.zeros(64 * 4096, device=dev)
    starts = torch.arange(0, 64, dtype=torch.int32, device=dev)

    def launch(tokens: int, reqs: int, offset: int) -> None:
        masked_rows[(reqs,)](out, starts[offset:], tokens, 1, reqs, HEADS=8)

    for tokens, reqs in ((17, 3), (16, 3), (1, 2)):  # the waves: aligned slices only
        launch(tokens, reqs, 0)
    torch.cuda.synchronize()
    launches = keys.launched(masked_rows)
    ((device, seen),) = launches.items()
    params = keys.params_of(masked_rows)
    e = keys.enumerate_keys("masked_rows", params, seen, keys.Ranges.of(8, 2048, 2))
    assert e.missing, e.to_dict()
    done = keys.Compiled()
    keys.compile_missing(masked_rows, device, e.missing, done)
    assert done.failed == [] and done.compiled == len(e.missing), done
    late: list = []
    watch = jit_watch.JitWatch()
    watch.arm(late.append)
    try:
        for tokens in (1, 16, 32, 45):
            for reqs in (1, 2, 8):
                for offset in (0, 1, 3):
                    launch(tokens, reqs, offset)
        torch.cuda.synchronize()
    finally:
        watch.uninstall()
    assert late == [], [event.describe() for event in late]


def test_a_compile_only_launch_runs_nothing_and_leaves_its_key_loaded(cuda_device):
    """The MoE bucket pass's mode: launches inside compile their keys in threads and return
    without running; afterwards each key is compiled and loaded, and a real launch of it
    compiles nothing."""
    import torch

    from launcher.runtime.prewarm.accelerators.parallel_compile import compile_only
    from tests.gpu.keys_kernel import masked_rows

    dev = f"cuda:{cuda_device}"
    out = torch.zeros(64 * 4096, device=dev)
    starts = torch.arange(0, 64, dtype=torch.int32, device=dev)
    with compile_only([masked_rows]):
        for tokens in (3, 32):
            masked_rows[(4,)](out, starts[1:], tokens, 1, 4, HEADS=4)
    torch.cuda.synchronize()
    assert int((out != 0).sum()) == 0, "a compile-only launch ran"
    assert "run" not in vars(masked_rows)
    ((cache, *_),) = masked_rows.device_caches.values()
    compiled = [k for k in cache.values() if not hasattr(k, "result")]
    assert len(compiled) >= 2 and all(k.module is not None for k in compiled)
    late: list = []
    watch = jit_watch.JitWatch()
    watch.arm(late.append)
    try:
        masked_rows[(4,)](out, starts[1:], 3, 1, 4, HEADS=4)
        torch.cuda.synchronize()
    finally:
        watch.uninstall()
    assert late == [] and int((out != 0).sum()) > 0
