"""GPU tests: real kernels on a CUDA device (the H200 test machine), never CI.

Every test here asks for ``cuda_device``; it skips when torch, Triton, CuPy or a CUDA
device is missing, or when the card is smaller than the 96 GB card it emulates.
"""

from __future__ import annotations

import pytest

EMULATED_VISIBLE = int(95.01 * 1024**3)


@pytest.fixture(scope="session")
def cuda_device() -> int:
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    pytest.importorskip("cupy")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    # Query without keeping a context alive in the test process: the scenarios run
    # in their own processes and need the whole card.
    total = torch.cuda.get_device_properties(0).total_memory
    if total < EMULATED_VISIBLE:
        pytest.skip(f"card has {total / 1024**3:.1f} GiB; the scenarios emulate 95.01 GiB")
    return 0
