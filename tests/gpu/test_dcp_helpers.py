"""The Triton provider's DCP helpers on a real GPU: after the prewarm, serving launches
compile nothing.

The fork's kernels stand in as ``tests.gpu.dcp_standins`` (same launcher signatures and
constexpr names, launched the way the fork launches them), installed under the fork's
module names. The provider runs them from a worker-like context (DCP 4, interleave 64,
DCP rank 1, read from the runner as vLLM keeps them); then calls shaped like a 16K-token
prefill and the decode batches run with the late-JIT watchdog armed.
"""

from __future__ import annotations

import sys
from types import ModuleType, SimpleNamespace

import pytest

from launcher.deployment import resolve
from launcher.runtime.prewarm import PrewarmContext, load
from launcher.runtime.prewarm.providers import triton_kernels as tk

ROWS, SEQS, TOPK, PAGE = 3072, 8, 2048, 64
"""GLM-5.2 in profiles/glm52.yaml: max_num_batched_tokens, max_num_seqs, index_topk, block."""


@pytest.fixture
def standins(monkeypatch):
    from tests.gpu import dcp_standins as s

    modules = {
        tk.BACKEND: {
            "_map_global_topk_to_gathered_ckv": s.map_global_topk,
            "_mask_page_table_after_nsa_len": s.mask_page_table,
        },
        tk.SPARSE_UTILS: {"triton_filter_and_convert_dcp_index": s.filter_dcp_index},
        tk.INDEXER: {"build_prefill_chunk_metadata": s.build_prefill_chunk_metadata},
        "vllm.v1.attention.ops.dcp": {"correct_attn_out": s.correct_attn_out},
    }
    for name, attrs in modules.items():
        module = ModuleType(name)
        vars(module).update(attrs)
        monkeypatch.setitem(sys.modules, name, module)
    return s


def _context(device: int) -> PrewarmContext:
    from launcher.profile import load_profile
    from tests.conftest import PROFILES, gathered

    loaded = load_profile(PROFILES / "glm52.yaml", ("parallel.interleave=64",))
    parallel = SimpleNamespace(decode_context_parallel_size=4, cp_kv_cache_interleave_size=64)
    runner = SimpleNamespace(vllm_config=SimpleNamespace(parallel_config=parallel), dcp_rank=1)
    return PrewarmContext(
        resolve(loaded.profile), gathered(loaded).facts, 1, f"cuda:{device}", runner
    )


def _serve(s, device: str) -> None:
    """What the backend launches for a 16K-token prompt's chunks and the decode batches."""
    import torch

    i32 = {"dtype": torch.int32, "device": device}
    reqs = 3
    starts = torch.zeros((4, SEQS), **i32)[:, :reqs]
    lens = torch.full((4, SEQS), 4096, **i32)[:, :reqs]
    selected = torch.empty((ROWS, TOPK), **i32)  # the builder's persistent buffer
    counts = torch.empty(ROWS, **i32)
    topk = torch.randint(0, 16384, (ROWS, TOPK), **i32)
    for rows in (ROWS, 1000, 17):
        s.map_global_topk(
            torch.zeros(rows, **i32), topk[:rows], starts, lens, selected[:rows], counts[:rows],
            dcp_size=4, cp_kv_cache_interleave_size=64, padded_rank_tokens=97 * PAGE,
        )  # fmt: skip
        s.mask_page_table(selected[:rows], counts[:rows])
    for reqs, qlen in ((1, 3072), (3, 1000), (1, 1), (2, 4097)):
        qsl_cpu = torch.arange(0, (reqs + 1) * qlen, qlen, dtype=torch.int32)
        seq_cpu = torch.full((reqs,), 16384 + qlen, dtype=torch.int32)
        s.build_prefill_chunk_metadata(
            0, reqs, qsl_cpu.to(device), qsl_cpu, seq_cpu.to(device), seq_cpu.to(device),
            seq_cpu, torch.zeros((reqs, 8), **i32), 1,
            dcp_rank=1, dcp_world_size=4, cp_kv_cache_interleave_size=64,
        )  # fmt: skip
    width = tk.block_table_width(_context(0), tk.Dcp(4, 64, 1, "runtime"))
    table = torch.zeros((SEQS, width), **i32)
    for tokens in (1, 4, 8, 16, 32):
        s.filter_dcp_index(
            torch.zeros(tokens, **i32), table, topk[:tokens], dcp_size=4, dcp_rank=1,
            cp_kv_cache_interleave_size=64, BLOCK_SIZE=PAGE, BLOCK_STRIDE_ROWS=PAGE,
            NUM_TOPK_TOKENS=TOPK, return_valid_counts=True,
        )  # fmt: skip
        out = torch.zeros((tokens, 64, 512), dtype=torch.bfloat16, device=device)
        lses = torch.zeros((4, tokens, 64), dtype=torch.float32, device=device)
        s.correct_attn_out(out, lses, 1, s.CPTritonContext(), is_lse_base_on_e=True)
    torch.cuda.synchronize()


def test_serving_compiles_nothing_after_the_prewarm(cuda_device, standins):
    from launcher.runtime import jit_watch

    watch = jit_watch.JitWatch()
    assert watch.install()
    saved, jit_watch.watch = jit_watch.watch, watch
    try:
        result = load("triton").run(_context(cuda_device))
        assert result.skipped == "" and result.warmed == 5, result
        assert result.compiled >= 5
        prewarmed = {e.kernel.rsplit(".", 1)[1] for e in watch.events}
        watch.arm()
        _serve(standins, f"cuda:{cuda_device}")
    finally:
        jit_watch.watch = saved
        watch.uninstall()
    print(f"prewarm: {result.compiled} compiles of {sorted(prewarmed)} in {result.seconds:.2f}s")
    assert [e.describe() for e in watch.late] == []
    assert all("DCP_RANK" not in e.constexprs or e.constexprs["DCP_RANK"] == 1
               for e in watch.events)  # fmt: skip


def test_a_rank_the_prewarm_did_not_see_compiles_late(cuda_device, standins):
    """The check above can fail: serving as DCP rank 2 after a rank-1 prewarm."""
    import torch

    from launcher.runtime import jit_watch

    watch = jit_watch.JitWatch()
    assert watch.install()
    saved, jit_watch.watch = jit_watch.watch, watch
    try:
        load("triton").run(_context(cuda_device))
        watch.arm()
        i32 = {"dtype": torch.int32, "device": f"cuda:{cuda_device}"}
        width = tk.block_table_width(_context(0), tk.Dcp(4, 64, 1, "runtime"))
        standins.filter_dcp_index(
            torch.zeros(4, **i32), torch.zeros((SEQS, width), **i32),
            torch.zeros((4, TOPK), **i32), dcp_size=4, dcp_rank=2,
            cp_kv_cache_interleave_size=64, BLOCK_SIZE=PAGE, BLOCK_STRIDE_ROWS=PAGE,
            NUM_TOPK_TOKENS=TOPK, return_valid_counts=True,
        )  # fmt: skip
        torch.cuda.synchronize()
    finally:
        jit_watch.watch = saved
        watch.uninstall()
    assert [e.constexprs.get("DCP_RANK") for e in watch.late] == [2]
