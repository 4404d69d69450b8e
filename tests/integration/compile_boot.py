"""One "boot" of vLLM's compile path on CPU, as vLLM 0.26 runs it on the GPU: a process that
compiles (or loads) a model through ``VllmBackend`` with AOT graphs and per-piece Inductor
artifacts, the planned worker's ``runtime.compile_dir`` watching. Prints one JSON line.

``python -m tests.integration.compile_boot link|nolink`` with ``VLLM_CACHE_ROOT`` set. The
model's forward reads a missing attribute of a ``transformers`` config, the failed inline
that moved the GLM model's warm directory on the H200. vLLM's CPU platform turns its compile
mode down to Dynamo alone; the boot turns it back, and ``VLLM_USE_MEGA_AOT_ARTIFACT=0`` keeps
vLLM 0.26's layout (torch 2.11 has no mega artifact; later vLLMs on torch 2.12 use it).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any

import torch
from torch import nn
from transformers import PretrainedConfig
from vllm.compilation.compiler_interface import InductorStandaloneAdaptor
from vllm.compilation.decorators import support_torch_compile
from vllm.config import CompilationConfig, CompilationMode, VllmConfig, set_current_vllm_config
from vllm.forward_context import set_forward_context

from launcher.runtime import compile_dir

CONFIG = PretrainedConfig()
calls = {"compiled": 0, "loaded": 0}


@support_torch_compile(dynamic_arg_dims={"x": 0})
class Tiny(nn.Module):
    def __init__(self, *, vllm_config: VllmConfig, prefix: str = "") -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        width = getattr(CONFIG, "no_such_width", None)  # raises inside transformers, handled
        return self.lin(x) * 2 + (1 if width is None else 0)


def _count(name: str, key: str) -> None:
    original = getattr(InductorStandaloneAdaptor, name)

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls[key] += 1
        return original(self, *args, **kwargs)

    setattr(InductorStandaloneAdaptor, name, counted)


def main(link: bool) -> dict[str, Any]:
    compile_dir.install()
    _count("compile", "compiled")
    _count("load", "loaded")
    config = VllmConfig(compilation_config=CompilationConfig(mode=CompilationMode.VLLM_COMPILE))
    config.compilation_config.mode = CompilationMode.VLLM_COMPILE  # the CPU platform's undone
    config.compilation_config.compile_sizes = []
    with set_current_vllm_config(config):
        model = Tiny(vllm_config=config, prefix="model")
    with set_current_vllm_config(config), set_forward_context(None, config):
        model(torch.randn(8, 4))
    done: Any = None
    if link:
        done = compile_dir.link_for_warm_boots(compile_dir.compiled_parts(model))
    if isinstance(done, compile_dir.Linked | compile_dir.Unneeded):
        done = {"kind": type(done).__name__, **dataclasses.asdict(done)}
    naming = compile_dir._naming[0] if compile_dir._naming else None  # none: a whole AOT load
    return {
        "named": naming.local_dir.parent.parent.name if naming else None,
        "linked": done,
        **calls,
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1] == "link"), default=list))
