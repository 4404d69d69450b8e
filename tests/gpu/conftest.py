"""GPU tests: real kernels on a CUDA device (the H200 test machine), never CI.

Every test here asks for ``cuda_device``; it skips when torch, Triton, CuPy or a CUDA
device is missing, or when the card is smaller than the 96 GB card it emulates.
"""

from __future__ import annotations

import pytest

from tests.conftest import need, need_module

EMULATED_VISIBLE = int(95.01 * 1024**3)


@pytest.fixture(scope="session")
def cuda_device() -> int:
    torch = need_module("gpu", "torch", "torch is not installed")
    need_module("gpu", "triton", "triton is not installed")
    need_module("gpu", "cupy", "cupy is not installed")
    need("gpu", torch.cuda.is_available(), "no CUDA device")
    # Query without keeping a context alive in the test process: the scenarios run
    # in their own processes and need the whole card.
    total = torch.cuda.get_device_properties(0).total_memory
    need(
        "gpu", total >= EMULATED_VISIBLE,
        f"card has {total / 1024**3:.1f} GiB; the scenarios emulate 95.01 GiB",
    )  # fmt: skip
    return 0


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    """The real-vLLM tier's machine: vLLM importable, CUDA up, GPUs listed by NVML.

    GPU_TIER_DIR (logs, run dirs), GPU_TIER_MODELS and GPU_TIER_CACHE (kept between runs
    on a warm machine) default to a pytest temporary directory; GPU_TIER_BALLAST=1 holds
    all but 95.01 GiB of each card in another process during every boot.
    """
    import importlib.util
    import os
    from pathlib import Path

    from tests.gpu import nvml, summary
    from tests.gpu.boot import Lab

    need(
        "gpu",
        importlib.util.find_spec("vllm") is not None,
        "vLLM is not importable (tests/gpu/run-tier.sh assembles the kit)",
    )
    torch = need_module("gpu", "torch", "torch is not installed")
    need("gpu", torch.cuda.is_available(), "no CUDA device")
    try:
        devices = nvml.visible_indices()
    except nvml.NvmlError as exc:
        need("gpu", False, f"NVML unavailable: {exc}")
    root = Path(os.environ.get("GPU_TIER_DIR") or tmp_path_factory.mktemp("gpu-tier"))
    root.mkdir(parents=True, exist_ok=True)
    summary.root = root
    return Lab(
        root=root,
        models=Path(os.environ.get("GPU_TIER_MODELS") or root / "models"),
        cache=Path(os.environ.get("GPU_TIER_CACHE") or root / "cache"),
        devices=devices,
        ballast=os.environ.get("GPU_TIER_BALLAST") == "1",
    )


@pytest.fixture(scope="class")
def booted(request, lab):
    """The boot of the class's ``spec`` (a ``tests.gpu.boot.BootSpec``), once per class."""
    import contextlib

    from tests.gpu import summary
    from tests.gpu.ballast import ballast
    from tests.gpu.boot import boot

    spec = request.cls.spec
    need(
        f"gpu{spec.ranks}" if spec.ranks > 1 else "gpu", spec.ranks <= len(lab.devices),
        f"{spec.name} needs {spec.ranks} GPUs, {len(lab.devices)} visible",
    )  # fmt: skip
    held = ballast(lab.devices[: spec.ranks]) if lab.ballast else contextlib.nullcontext()
    with held:
        result = boot(lab, spec)
    summary.add(result)
    return result


def pytest_terminal_summary(terminalreporter):
    from tests.gpu import summary

    if summary.booted():
        terminalreporter.write("\n" + summary.render(summary.rows()))
