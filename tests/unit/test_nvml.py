"""The cards through NVML (nvidia-ml-py): what a launch, an artifact's keys and qualify read,
on a fake ``pynvml``; a clear refusal without the binding or the driver; the real binding
has every call the reader makes."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from launcher.artifact.keys import CudaTarget, read_cuda_target
from launcher.cli import cli
from launcher.gpu import nvml
from launcher.launch.hardware import NoGpuInfo, query_gpus
from launcher.qualify import sampler
from launcher.units import GiB, MiB
from tests.conftest import MINIMAL
from tests.unit import fake_pynvml
from tests.unit.fake_pynvml import Card

H200 = 143771 * MiB
CARDS = [
    Card("NVIDIA H200", H200, 0, (9, 0), "GPU-a", reserved=500 * MiB),
    Card("NVIDIA H200", H200, 512 * MiB, (9, 0), "GPU-b", reserved=500 * MiB),
    Card("NVIDIA RTX PRO 6000 Blackwell Server Edition", int(95.59 * GiB), 0, (12, 0), "GPU-c"),
]


@pytest.fixture
def cards(monkeypatch):
    fake = fake_pynvml.module(CARDS, driver="580.159.04", cuda=12080)
    fake_pynvml.install(monkeypatch, fake)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return fake


def test_the_real_binding_has_every_call_the_reader_makes():
    """nvidia-ml-py is in the serve and test extras (tests/run installs it)."""
    import pynvml

    missing = [n for n in fake_pynvml.NAMES if not hasattr(pynvml, n)]
    assert not missing, missing


def test_a_launch_reads_count_names_memory_and_driver(cards):
    gpus = query_gpus()
    assert [g.index for g in gpus] == [0, 1, 2]
    assert [g.kind for g in gpus] == ["h200", "h200", "rtx-pro-6000"]
    assert gpus[1].used == 512 * MiB and gpus[1].total == H200
    # the driver's reservation is neither used nor free (the v2 query keeps it apart)
    assert gpus[1].free == H200 - 512 * MiB - 500 * MiB
    assert {g.driver for g in gpus} == {"580.159.04"}


def test_a_driver_without_the_v2_query_reads_v1(monkeypatch):
    fake_pynvml.install(monkeypatch, fake_pynvml.module(CARDS, memory_v2=False))
    m = nvml.memory(1)
    assert (m.total, m.free, m.reserved) == (H200, H200 - 1012 * MiB, 0)
    assert m.used == m.total - m.free


def test_an_artifacts_cuda_keys_are_the_visible_cards_and_the_drivers_cuda(cards):
    assert read_cuda_target({}) == CudaTarget("12.0, 9.0", "12.8")
    assert read_cuda_target({"CUDA_VISIBLE_DEVICES": "0,1"}) == CudaTarget("9.0", "12.8")
    assert read_cuda_target({"CUDA_VISIBLE_DEVICES": "GPU-c"}) == CudaTarget("12.0", "12.8")


def test_qualify_samples_free_memory_by_index_or_uuid(cards):
    readers = sampler.nvml_readers(2, {"CUDA_VISIBLE_DEVICES": "GPU-b,2"})
    assert readers is not None
    assert readers[0]() == CARDS[1].free and readers[1]() == CARDS[2].free


@pytest.mark.parametrize(
    ("fake", "says"),
    [
        (None, r"nvidia-ml-py\) is not installed: pip install nvidia-ml-py"),
        (fake_pynvml.module(CARDS, fails="nvmlInit"), "no NVIDIA driver on this machine"),
    ],
)
def test_without_the_binding_or_the_driver_the_error_names_the_fix(monkeypatch, fake, says):
    fake_pynvml.install(monkeypatch, fake)
    with pytest.raises(NoGpuInfo, match=says):
        query_gpus()
    with pytest.raises(NoGpuInfo, match=says):
        read_cuda_target({})
    assert sampler.nvml_readers(1, {"CUDA_VISIBLE_DEVICES": "GPU-a"}) is None


def test_a_query_the_driver_refuses_is_named(monkeypatch):
    fake_pynvml.install(monkeypatch, fake_pynvml.module(CARDS, fails="nvmlDeviceGetName"))
    with pytest.raises(NoGpuInfo, match="nvmlDeviceGetName failed"):
        query_gpus()


def test_a_launch_without_nvml_exits_1_with_the_fix_and_no_traceback(write, tmp_path, monkeypatch):
    fake_pynvml.install(monkeypatch, None)
    path = write("p.yaml", MINIMAL)
    out = CliRunner().invoke(
        cli, [str(path), "--set", f"runtime.cache_root={tmp_path}", "--run-dir", str(tmp_path)]
    )
    assert out.exit_code == 1, out.output
    assert "pip install nvidia-ml-py" in out.output and "--dry-run" in out.output
    assert "Traceback" not in out.output
    dry = CliRunner().invoke(cli, [str(path), "--json", "--set", f"runtime.cache_root={tmp_path}"])
    assert dry.exit_code == 0 and json.loads(dry.stdout)["fits"]  # the dry run needs no NVML
