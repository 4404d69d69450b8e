"""vLLM's own sampler warmup on the scratch stage, against vLLM's real dummy sampler run.

The stage's waves fill the runner's input batch, whose top-k is int32; vLLM's dummy sampler
run (its memory profile calls it after the stage) fills top-k from a Python int, int64. Under
MTP the rejection sampler expands temperature, top-k and top-p to the draft tokens with one
Triton kernel keyed on the input's dtype, so the int64 key came only from vLLM's profile (H100,
the GLM tier, 2026-12-06) until the stage ran that same dummy run.
"""

from __future__ import annotations

from types import SimpleNamespace

from launcher.runtime.prewarm.stage import serving_batches as sb
from tests.conftest import need_serving

VOCAB = 64


class _Recorder:
    """A sampler or rejection sampler: records the sampling metadata it was handed."""

    logprobs_mode = "raw_logprobs"

    def __init__(self) -> None:
        self.metadata: list = []

    def __call__(self, *args, **kwargs):
        self.metadata.append(kwargs.get("sampling_metadata") or args[-1])


def _runner(max_num_seqs: int, max_num_batched_tokens: int):
    """A runner whose dummy sampler run is vLLM's own (bound to it), whose model returns
    random logits, and whose dummy forward records how it was called."""
    import torch
    from vllm.v1.worker.gpu_model_runner import GPUModelRunner

    runner = SimpleNamespace(
        vllm_config=SimpleNamespace(model_config=SimpleNamespace(multimodal_config=None)),
        model=SimpleNamespace(compute_logits=lambda h: torch.randn(h.shape[0], VOCAB)),
        device=torch.device("cpu"),
        sampler=_Recorder(),
        rejection_sampler=_Recorder(),
        speculative_config=SimpleNamespace(
            rejection_sample_method="standard", draft_sample_method="greedy"
        ),
        dummy_runs=[],
    )

    def dummy_run(num_tokens: int, **kwargs):
        runner.dummy_runs.append((num_tokens, kwargs))
        hidden = torch.zeros(num_tokens, 16, dtype=torch.bfloat16)
        return hidden, hidden[: min(num_tokens, max_num_seqs)]

    runner._dummy_run = dummy_run
    worker = SimpleNamespace(
        model_runner=runner,
        vllm_config=SimpleNamespace(
            scheduler_config=SimpleNamespace(
                max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens
            )
        ),
    )
    return worker, GPUModelRunner._dummy_sampler_run.__get__(runner)


def test_the_warmup_runs_vllms_dummy_forward_as_its_v1_worker_does_after_sizing(monkeypatch):
    need_serving("vllm")
    import torch
    from vllm.config import CUDAGraphMode

    monkeypatch.setattr(torch.accelerator, "synchronize", lambda *a, **k: None)
    worker, run = _runner(max_num_seqs=8, max_num_batched_tokens=2048)
    said = sb.sampler_warmup(worker, run)
    ((num_tokens, kwargs),) = worker.model_runner.dummy_runs
    assert num_tokens == 8 and "8 rows" in said
    assert kwargs == {"skip_eplb": True, "cudagraph_runtime_mode": CUDAGraphMode.NONE}
    # fewer batched tokens than sequences: one row a token, as vLLM's worker takes the minimum
    worker, run = _runner(max_num_seqs=8, max_num_batched_tokens=4)
    sb.sampler_warmup(worker, run)
    assert worker.model_runner.dummy_runs[0][0] == 4


def test_the_rejection_sampler_gets_the_int64_top_k_that_no_served_row_hands_it(monkeypatch):
    """The tensors the rejection sampler expands to the draft tokens (temperature, top-k,
    top-p): vLLM's dummy metadata has fp32 and int64 among them; the waves' rows come from the
    input batch, whose top-k is int32. So int64 is the warmup's alone, and the warmup reaches
    it through vLLM's own code, not a copy of its metadata."""
    need_serving("vllm")
    import torch
    from vllm.v1.worker.gpu_input_batch import InputBatch

    monkeypatch.setattr(torch.accelerator, "synchronize", lambda *a, **k: None)
    worker, run = _runner(max_num_seqs=8, max_num_batched_tokens=2048)
    sb.sampler_warmup(worker, run)
    rejection = worker.model_runner.rejection_sampler.metadata
    assert rejection, "vLLM's dummy sampler run called no rejection sampler under MTP"
    sampled = [m for m in rejection if not m.all_greedy]
    expanded = {
        t.dtype for m in sampled for t in (m.temperature, m.top_k, m.top_p) if t is not None
    }
    assert {torch.float32, torch.int64} <= expanded
    batch = InputBatch(
        max_num_reqs=8,
        max_model_len=64,
        max_num_batched_tokens=64,
        device=torch.device("cpu"),
        vocab_size=VOCAB,
        block_sizes=[16],
        max_num_blocks_per_req=[4],
    )
    served = {batch.temperature.dtype, batch.top_k.dtype, batch.top_p.dtype}
    assert served == {torch.float32, torch.int32}
    assert torch.int64 in expanded - served
