"""vLLM's modules are named by string in ``launcher/vllm/`` only (issue 65). Every string
literal (f-strings' literal parts included) that names a vLLM module (``vllm.<package>...``,
``module:attribute`` forms too) outside that room fails here (55 over 20 files before the room
was made, 0 after); a docstring may name one."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "launcher"

TOP = frozenset(
    (
        "_aiter_ops",
        "_custom_ops",
        "_version",
        "_xpu_ops",
        "assets",
        "attention",
        "benchmarks",
        "collect_env",
        "compilation",
        "config",
        "connections",
        "cute_utils",
        "device_allocator",
        "distributed",
        "engine",
        "entrypoints",
        "env_override",
        "envs",
        "exceptions",
        "forward_context",
        "inputs",
        "ir",
        "kernels",
        "logger",
        "logging_utils",
        "logits_process",
        "logprobs",
        "lora",
        "model_executor",
        "model_inspection",
        "models",
        "multimodal",
        "outputs",
        "parser",
        "platforms",
        "plugins",
        "pooling_params",
        "profiler",
        "ray",
        "reasoning",
        "renderers",
        "sampling_params",
        "scalar_type",
        "sequence",
        "snapshot",
        "tasks",
        "third_party",
        "tilelang_utils",
        "tokenizers",
        "tool_parsers",
        "tracing",
        "transformers_utils",
        "triton_utils",
        "usage",
        "utils",
        "v1",
        "version",
        "vllm_flash_attn",
        "worker",
    )
)
"""vLLM's top-level modules and packages (0.26-0.33, and ``attention``, ``worker`` of older
layouts the runtime still tries): ``vllm.runtime`` or ``vllm.extra_args`` are profile keys."""

MODULE = re.compile(r"vllm\.([A-Za-z_]\w*)")


def _strings(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.value


def names_a_module(text: str) -> bool:
    return any(
        m.group(1) in TOP
        for m in MODULE.finditer(text)
        if m.start() == 0 or not (text[m.start() - 1].isalnum() or text[m.start() - 1] in "_.")
    )


def counts() -> Counter[str]:
    """Module-path strings by file, outside ``launcher/vllm/``."""
    out: Counter[str] = Counter()
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).parts[0] == "vllm":
            continue
        tree = ast.parse(path.read_text())
        docstrings = {
            id(n.body[0].value)
            for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and n.body
            and isinstance(n.body[0], ast.Expr)
            and isinstance(n.body[0].value, ast.Constant)
        }
        for node in ast.walk(tree):
            if id(node) in docstrings or not isinstance(node, ast.Constant):
                continue
            if isinstance(node.value, str) and names_a_module(node.value):
                out[str(path.relative_to(PACKAGE))] += 1
    return out


def test_no_room_but_vllm_names_a_vllm_module():
    found = counts()
    assert not found, (
        f"vLLM module paths named by string outside launcher/vllm/: {dict(found)}; declare "
        "the internal in launcher/vllm/internals.py (or the name beside its table there) and "
        "read it from there"
    )


def test_the_count_sees_a_module_path_and_not_a_profile_key():
    assert names_a_module("vllm.v1.worker.gpu_worker:Worker")
    assert names_a_module("vllm.config")
    assert not names_a_module("vllm.attention_backend")
    assert not names_a_module("vllm.extra_args.0")
    assert not names_a_module("see run/vllm.log")
