"""vLLM's torch.compile'd helpers, called before sizing at every size class Dynamo tells apart.

On the H200, ``update_num_computed_tokens_for_batch_change`` (async speculative decoding)
compiled late on the first request of 2 of 4 GLM boots: the serving waves had called it only
at the batch sizes their steps happened to have. These tests run vLLM 0.26's own function under
Dynamo on the CPU: after the stage's calls, no batch a deployment can serve makes it trace again.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from launcher.runtime.prewarm.model import compiled_helpers
from tests.conftest import need_serving

MAX_NUM_REQS = 12


def _runner(torch, max_num_reqs: int = MAX_NUM_REQS) -> SimpleNamespace:
    """The GPU model runner's buffers the helper reads and writes, as vLLM 0.26 makes them."""

    def buffer(dtype, fill=0):
        return SimpleNamespace(gpu=torch.full((max_num_reqs,), fill, dtype=dtype))

    return SimpleNamespace(
        max_num_reqs=max_num_reqs,
        use_async_spec_decode=True,
        num_computed_tokens=torch.arange(max_num_reqs, dtype=torch.int32) * 7,
        num_accepted_tokens=buffer(torch.int32, 1),
        prev_positions=buffer(torch.int64, -1),
        prev_num_draft_tokens=buffer(torch.int32, 2),
    )


def _serve(torch, fn, runner, rows: int, before: int) -> None:
    """One step as ``GPUModelRunner._prepare_inputs`` calls the helper."""
    with torch.inference_mode():
        fn(
            runner.num_computed_tokens,
            runner.num_accepted_tokens.gpu[:rows],
            runner.prev_positions.gpu[:rows],
            torch.ones(before, dtype=torch.int32),
            runner.prev_num_draft_tokens.gpu,
            torch.zeros(rows, dtype=torch.int32),
        )


@pytest.fixture
def dynamo_fn():
    """vLLM's function under Dynamo as vLLM wraps it (``dynamic=True``), lowered eagerly: which
    calls trace a new graph is Dynamo's decision, and no C++ compiler is needed for it."""
    utils = need_serving("vllm.v1.spec_decode.utils")
    need_serving("torch")
    import torch._dynamo  # binds torch too

    original = utils.update_num_computed_tokens_for_batch_change._torchdynamo_orig_callable
    torch._dynamo.reset()
    yield torch, torch.compile(original, dynamic=True, backend="eager")
    torch._dynamo.reset()


def test_after_the_stage_no_batch_of_the_deployment_traces_the_batch_change_helper(dynamo_fn):
    torch, fn = dynamo_fn
    runner = _runner(torch)
    kept = [
        t.clone()
        for t in (
            runner.num_computed_tokens,
            runner.num_accepted_tokens.gpu,
            runner.prev_positions.gpu,
            runner.prev_num_draft_tokens.gpu,
        )
    ]
    compiled_helpers.batch_change(runner, fn, compiled_helpers.size_classes(MAX_NUM_REQS))
    assert torch.equal(runner.num_computed_tokens, kept[0])  # the runner's buffers put back
    assert torch.equal(runner.prev_positions.gpu, kept[2])
    with torch._dynamo.config.patch(error_on_recompile=True):
        for rows in range(1, MAX_NUM_REQS + 1):
            for before in range(1, MAX_NUM_REQS + 1):
                _serve(torch, fn, runner, rows, before)


def test_sizes_above_one_alone_leave_a_lone_request_to_trace_while_serving(dynamo_fn):
    """What the waves left: batches of several requests only. The first lone request traces
    a new graph (Dynamo specializes a size of 1), which is what the test above rules out."""
    torch, fn = dynamo_fn
    runner = _runner(torch)
    compiled_helpers.batch_change(runner, fn, [2, 3])
    with torch._dynamo.config.patch(error_on_recompile=True):
        _serve(torch, fn, runner, 5, 4)  # covered
        with pytest.raises(torch._dynamo.exc.RecompileError):
            _serve(torch, fn, runner, 1, 4)


def test_size_classes_cover_one_two_distinct_sizes_and_the_buffer_length():
    assert compiled_helpers.size_classes(12) == [1, 2, 3, 12]
    assert compiled_helpers.size_classes(2) == [1, 2]
    assert compiled_helpers.size_classes(1) == [1]


def test_without_async_speculative_decoding_it_says_why_it_calls_nothing():
    ctx = SimpleNamespace(model_runner=SimpleNamespace(use_async_spec_decode=False))
    assert compiled_helpers.find(ctx).startswith("skipped: no async speculative decoding")
