"""Reads with a silent default in the runtime room, counted (issue 65: "nothing reads a vLLM
attribute with a silent default"). A ``getattr(obj, "name", default)`` on anything but ``self``
is one: on vLLM's objects it belongs in ``launcher/vllm/internals.py`` and is read through
``launcher/runtime/worker/readings.py`` (a missing one then a named refusal or a recorded
downgrade); on Triton's or the launcher's own objects it may stay. The ceilings only go down, per
file, as reads move into the declared internals (2026-12-06: 122 in all)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "launcher" / "runtime"

CEILINGS = {
    "launcher/runtime/compile_dir.py": 7,
    "launcher/runtime/compile_key.py": 1,
    "launcher/runtime/jit_watch.py": 17,
    "launcher/runtime/phases.py": 1,
    "launcher/runtime/prewarm/__init__.py": 1,
    "launcher/runtime/prewarm/accelerators/inductor_pool.py": 2,
    "launcher/runtime/prewarm/accelerators/parallel_compile.py": 5,
    "launcher/runtime/prewarm/flow.py": 2,
    "launcher/runtime/prewarm/model/call_sites.py": 1,
    "launcher/runtime/prewarm/model/compiled_helpers.py": 1,
    "launcher/runtime/prewarm/model/moe_buckets.py": 11,
    "launcher/runtime/prewarm/model/moe_units.py": 4,
    "launcher/runtime/prewarm/providers/b12x.py": 2,
    "launcher/runtime/prewarm/providers/keys.py": 18,
    "launcher/runtime/prewarm/providers/triton_kernels.py": 2,
    "launcher/runtime/prewarm/providers/vllm_warmup.py": 12,
    "launcher/runtime/prewarm/stage/runner_state.py": 1,
    "launcher/runtime/prewarm/stage/scratch_kv.py": 23,
    "launcher/runtime/prewarm/stage/serving_batches.py": 5,
    "launcher/runtime/worker/compiled.py": 2,
    "launcher/runtime/worker/late.py": 1,
    "launcher/runtime/worker/stage.py": 2,
    "launcher/runtime/worker/steps.py": 1,
}


def _defaulted_reads(path: Path) -> int:
    count = 0
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) == 3
            and not (isinstance(node.args[0], ast.Name) and node.args[0].id == "self")
        ):
            count += 1
    return count


def test_reads_with_a_silent_default_in_the_runtime_only_go_down():
    found = {}
    for path in sorted(RUNTIME.rglob("*.py")):
        n = _defaulted_reads(path)
        if n:
            found[str(path.relative_to(ROOT))] = n
    over = {f: (n, CEILINGS.get(f, 0)) for f, n in found.items() if n > CEILINGS.get(f, 0)}
    assert not over, (
        f"reads with a default past their ceiling (found, ceiling): {over}; read vLLM's "
        "attributes through launcher/vllm/internals.py instead"
    )


def test_the_count_sees_a_read_with_a_default(tmp_path):
    sample = tmp_path / "m.py"
    sample.write_text('x = getattr(runner, "drafter", None)\ny = getattr(self, "_k", 0)\n')
    assert _defaulted_reads(sample) == 1
