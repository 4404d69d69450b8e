"""vLLM's ``torch.compile``'d helpers outside the model, called at each size class before sizing.

vLLM compiles a few small functions with ``torch.compile(dynamic=True)`` apart from the
model's graph. Dynamo still specializes a size of 1 and gives equal sizes one symbol, so the
first step whose batch falls in a class no earlier call saw traces a new graph, and Inductor
and Triton compile it while serving. The serving waves reach such a helper only at the batch
sizes their steps happen to have: on the H200, ``update_num_computed_tokens_for_batch_change``
(async speculative decoding, every step after the first) compiled late on 2 of 4 GLM boots,
each on its first request. Here each helper is called, with the runner's own buffers and in
inference mode as ``execute_model`` calls it, at every class of its sizes; the buffers are put
back as they were.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from launcher.runtime.prewarm import PrewarmContext, runtime_function
from launcher.vllm.internals import module_path, read_on

BATCH_CHANGE = module_path("serving.batch_change")


def size_classes(limit: int) -> list[int]:
    """The sizes 1..``limit`` Dynamo tells apart for one dimension: 1 (specialized), two
    different sizes above 1 (so no two dimensions share a symbol by chance) and ``limit``
    itself (equal to the runner's fixed-length buffers)."""
    return sorted({n for n in (1, 2, 3, limit) if 1 <= n <= limit})


def find(ctx: PrewarmContext) -> list[tuple[str, Callable[[], None]]] | str:
    runner = ctx.model_runner
    if not read_on("helpers.async_spec", runner, False):
        return (
            "skipped: no async speculative decoding here (vLLM calls "
            "update_num_computed_tokens_for_batch_change only with it)"
        )
    fn = runtime_function(BATCH_CHANGE)
    if fn is None:
        return f"missing: {BATCH_CHANGE.replace(':', '.')}"
    sizes = size_classes(int(runner.max_num_reqs))
    label = (
        f"update_num_computed_tokens_for_batch_change at {len(sizes) ** 2} "
        f"(rows, previous rows) pairs of {sizes}"
    )
    return [(label, lambda: batch_change(runner, fn, sizes))]


def batch_change(runner: Any, fn: Callable[..., None], sizes: list[int]) -> None:
    """Call ``fn`` as ``GPUModelRunner._prepare_inputs`` does under async speculative
    decoding: ``rows`` requests now, ``before`` requests in the step whose valid-token counts
    it reads."""
    import torch

    buffers = (
        runner.num_computed_tokens,
        runner.num_accepted_tokens.gpu,
        runner.prev_positions.gpu,
        runner.prev_num_draft_tokens.gpu,
    )
    kept = [b.clone() for b in buffers]
    device = runner.num_computed_tokens.device
    try:
        with torch.inference_mode():
            for rows in sizes:
                for before in sizes:
                    prev = runner.prev_positions.gpu[:rows]
                    prev.copy_(torch.arange(rows, device=device) % before)
                    prev[0] = -1  # a request new to this step, as vLLM marks it
                    fn(
                        runner.num_computed_tokens,
                        runner.num_accepted_tokens.gpu[:rows],
                        prev,
                        torch.ones(before, dtype=torch.int32, device=device),
                        runner.prev_num_draft_tokens.gpu,
                        torch.zeros(rows, dtype=torch.int32, device=device),
                    )
    finally:
        with torch.inference_mode():
            for b, k in zip(buffers, kept, strict=True):
                b.copy_(k)
