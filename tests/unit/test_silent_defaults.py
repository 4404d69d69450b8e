"""Reads with a silent default in the runtime room, counted (issue 65: "nothing reads a vLLM
attribute with a silent default"). A ``getattr(obj, "name", default)`` on anything but ``self``
is one: on vLLM's objects it belongs in ``launcher/vllm/internals.py`` and is read through
``read_on``/``resolve`` (or ``launcher/runtime/worker/readings.py``), its absence then a named
refusal, skip or fallback that the check before the weights logs. Reads on Triton's, torch's,
Python's or the launcher's own objects may stay: each is listed in ``ALLOWED`` with why. The
ceilings count what is left on vLLM's objects and only go down (2026-12-06: 122 reads in all,
then 63: 6 on vLLM's objects, 57 allowed; then 57: none on vLLM's objects, the last six
declared as ``assigned`` internals)."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "launcher" / "runtime"

CEILINGS: dict[str, int] = {}
"""None left on vLLM's objects: an attribute vLLM sets on an object it does not define as a
class member (the model's ``aot_compiled_fn``, a MoE layer's ``w13_weight``, the runner's
``jit_warmup_registry``, the fork's ``_ckv_extend_plan``) is declared too, as an ``assigned``
internal the scanner finds where vLLM sets it."""

_TRITON_FN = "Triton's JITFunction/kernel"
ALLOWED: dict[str, dict[str, str]] = {
    "launcher/runtime/compile_dir.py": {
        "_blaunch": "the launcher's own marker on a function it wrapped",
        "_artifacts": "torch's AOT-compiled function",
        "compiled_fn": "torch's AOT artifacts",
    },
    "launcher/runtime/compile_key.py": {"counters": "torch's dynamo utils module, maybe unloaded"},
    "launcher/runtime/jit_watch.py": {
        "knobs": "Triton's module (3.4 on)",
        "runtime": "Triton's knobs",
        "jit_function": "Triton's autotuner/heuristics wrapper",
        "arg_names": _TRITON_FN,
        "value": "Triton's constexpr",
        "{pre}": "Triton's hook names on a kernel object",
        "{post}": "Triton's hook names on a kernel object",
        "module": _TRITON_FN,
        "name": _TRITON_FN,
        "fn": "Triton's wrapper chain",
        "__name__": "Python's function attributes",
        "__module__": "Python's function attributes",
        "__dict__": "Python's module attributes (a lazy module may lack one)",
        "configs": "Triton's autotuner",
    },
    "launcher/runtime/prewarm/__init__.py": {
        "{attr}": "runtime_function: a module path the caller names, declared internals' own",
    },
    "launcher/runtime/prewarm/accelerators/inductor_pool.py": {
        "wakeup": "torch inductor's AsyncCompile",
        "_ready_future": "torch inductor's AsyncCompile",
    },
    "launcher/runtime/prewarm/accelerators/parallel_compile.py": {
        "AsyncCompileMode": "Triton's async_compile module (3.5 on)",
        "__name__": "Python's function attributes",
        "device_caches": _TRITON_FN,
        "future": "Triton's compiled kernel (3.6 on)",
    },
    "launcher/runtime/prewarm/flow.py": {
        "{what}": "the launcher's own providers",
        "why_not": "the launcher's own providers",
    },
    "launcher/runtime/prewarm/model/call_sites.py": {"id": "Python's ast nodes"},
    "launcher/runtime/prewarm/model/moe_buckets.py": {
        "children": "torch's Module",
        "shape": "torch's Parameter",
    },
    "launcher/runtime/prewarm/model/moe_units.py": {
        "{attr}": "the EXL3 modules' runtime dicts, looked for by name (moe.exl3, fork only)",
    },
    "launcher/runtime/prewarm/providers/b12x.py": {"token_counts": "b12x's sizing plan"},
    "launcher/runtime/prewarm/providers/keys.py": {
        "src": _TRITON_FN,
        "do_not_specialize": "Triton's KernelParam",
        "do_not_specialize_on_alignment": "Triton's KernelParam",
        "annotation_type": "Triton's KernelParam",
        "future": "Triton's compiled kernel (3.6 on)",
        "early": "the launcher's PrewarmContext (stand-in contexts lack it)",
        "replay": "the launcher's PrewarmContext (stand-in contexts lack it)",
        "keys": "Triton's autotuner",
        "configs": "Triton's autotuner",
        "cache": "Triton's autotuner",
    },
    "launcher/runtime/prewarm/providers/triton_kernels.py": {
        "CPTritonContext": "a kernel module's context class, where the line has one",
        "{attr}": "a kernel module's launchers, looked for by name",
    },
    "launcher/runtime/prewarm/providers/vllm_warmup.py": {
        "{name}": "a handle's wait/result/join, or a method dir() of its class listed",
        "modules": "torch's Module (the model may be None)",
        "early": "the launcher's PrewarmContext (stand-in contexts lack it)",
    },
    "launcher/runtime/prewarm/stage/serving_batches.py": {
        "index_topk": "the model's Hugging Face config (only DSA-indexer models have it)",
    },
    "launcher/runtime/worker/late.py": {"name": "the launcher's own prewarm providers"},
}


def _defaulted_reads(path: Path) -> list[str]:
    """The attribute each read with a default names (``{expr}`` where it is not a literal)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) == 3
            and not (isinstance(node.args[0], ast.Name) and node.args[0].id == "self")
        ):
            name = node.args[1]
            literal = isinstance(name, ast.Constant) and isinstance(name.value, str)
            out.append(name.value if literal else "{" + ast.unparse(name) + "}")
    return out


def _found() -> dict[str, list[str]]:
    found = {}
    for path in sorted(RUNTIME.rglob("*.py")):
        reads = _defaulted_reads(path)
        if reads:
            found[str(path.relative_to(ROOT))] = reads
    return found


def test_reads_with_a_silent_default_in_the_runtime_only_go_down():
    found = _found()
    left = {f: [r for r in reads if r not in ALLOWED.get(f, {})] for f, reads in found.items()}
    over = {
        f: (reads, CEILINGS.get(f, 0))
        for f, reads in left.items()
        if len(reads) > CEILINGS.get(f, 0)
    }
    assert not over, (
        f"reads with a default past their ceiling (found, ceiling): {over}; read vLLM's "
        "attributes through launcher/vllm/internals.py instead (read_on), or list a read on "
        "Triton's, torch's or the launcher's own objects in ALLOWED with why"
    )


def test_each_ceiling_is_what_is_left_so_a_read_moved_cannot_come_back():
    found = _found()
    left = {f: [r for r in reads if r not in ALLOWED.get(f, {})] for f, reads in found.items()}
    loose = {f: (len(left.get(f, [])), c) for f, c in CEILINGS.items() if len(left.get(f, [])) < c}
    assert not loose, f"lower these ceilings to what is left (found, ceiling): {loose}"


def test_every_allowed_read_is_still_there():
    """An allowed read that went away leaves its entry behind: removed, so no vLLM read can
    come back under its name."""
    found = {f: Counter(reads) for f, reads in _found().items()}
    stale = {f: [n for n in names if not found.get(f, {}).get(n)] for f, names in ALLOWED.items()}
    assert not {f: n for f, n in stale.items() if n}


def test_the_count_sees_a_read_with_a_default(tmp_path):
    sample = tmp_path / "m.py"
    sample.write_text(
        'x = getattr(runner, "drafter", None)\ny = getattr(self, "_k", 0)\nz = getattr(m, a, 1)\n'
    )
    assert _defaulted_reads(sample) == ["drafter", "{a}"]
