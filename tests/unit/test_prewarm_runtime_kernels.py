"""The DCP Triton helpers and the b12x provider against stand-ins of the fork's interfaces.

The stand-ins mirror what ../shared/FORK-AUDIT.md cites: the runner exposes
``vllm_config.parallel_config.decode_context_parallel_size`` and
``.cp_kv_cache_interleave_size`` and ``dcp_rank`` (and no ``dcp_size`` / ``cp_interleave``,
so a regression to those names fails); the kernel launchers keep the fork's signatures
and record the constexprs they were launched with instead of compiling anything.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from types import ModuleType, SimpleNamespace

import pytest
from click.testing import CliRunner

from launcher.deployment import resolve
from launcher.profile import load_profile
from launcher.runtime.prewarm import PrewarmContext, load, run_after_forward
from launcher.runtime.prewarm.providers import triton_kernels as tk
from tests.conftest import PROFILES, ROOT, gathered, need_serving

GLM = str(PROFILES / "glm52.yaml")
LINES = {
    "gilded-gnosis": ("vllm.runtime=gilded-gnosis", "vllm.attention_backend=B12X_MLA_SPARSE"),
    "b12x-fork": ("vllm.runtime=b12x-fork", "vllm.attention_backend=B12X"),
}
DCP = [(1, 1), (4, 64)]
ALL_KERNELS = (
    "_map_global_topk_to_gathered_ckv_kernel",
    "_build_prefill_chunk_metadata_kernel",
    "_mask_page_table_after_nsa_len_kernel",
    "triton_filter_and_convert_dcp_index",
    "correct_attn_out",
)
SEED = "mask_empty_context_kernel"
"""On every MLA deployment, DCP or not: a seed launch for the key enumeration."""


def context(line: str, *overrides: str, runner=None, rank: int = 0) -> PrewarmContext:
    loaded = load_profile(PROFILES / "glm52.yaml", (*LINES[line], *overrides))
    return PrewarmContext(resolve(loaded.profile), gathered(loaded).facts, rank, "cpu", runner)


def runner(dcp: int, interleave: int, rank: int) -> SimpleNamespace:
    """vLLM's GPU model runner as the fork's warmups read it (and nothing more)."""
    parallel = SimpleNamespace(
        decode_context_parallel_size=dcp, cp_kv_cache_interleave_size=interleave
    )
    return SimpleNamespace(vllm_config=SimpleNamespace(parallel_config=parallel), dcp_rank=rank)


# ------------------------------------------------------------------ fork stand-ins


class Launches:
    """The fork's launcher functions, recording the constexprs each launch implies."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []

    def modules(self) -> dict[str, ModuleType]:
        backend = ModuleType(tk.BACKEND)
        backend._map_global_topk_to_gathered_ckv = self.map_global_topk
        backend._mask_page_table_after_nsa_len = self.mask_page_table
        utils = ModuleType(tk.SPARSE_UTILS)
        utils.triton_filter_and_convert_dcp_index = self.filter_dcp_index
        indexer = ModuleType(tk.INDEXER)
        indexer.build_prefill_chunk_metadata = self.prefill_chunk_metadata
        dcp = ModuleType("vllm.v1.attention.ops.dcp")
        dcp.CPTritonContext = lambda: "ctx"

        def correct_attn_out(*args, **kwargs):
            return self.correct_attn_out(*args, **kwargs)

        correct_attn_out.__module__ = dcp.__name__  # as a function defined there
        dcp.correct_attn_out = correct_attn_out
        return {m.__name__: m for m in (backend, utils, indexer, dcp)}

    def map_global_topk(
        self,
        req_ids,
        token_indices,
        rank_req_starts,
        rank_req_lens,
        out,
        valid_counts,
        *,
        dcp_size,
        cp_kv_cache_interleave_size,
        padded_rank_tokens,
    ):
        # The fork's own checks (b12x_mla_sparse._map_global_topk_to_gathered_ckv).
        assert token_indices.shape == out.shape
        assert rank_req_starts.shape == rank_req_lens.shape
        assert rank_req_starts.shape[0] == dcp_size
        tensors = (req_ids, token_indices, rank_req_starts, rank_req_lens, out, valid_counts)
        assert all(str(t.dtype) == "torch.int32" for t in tensors)
        self.calls.append(
            (
                "_map_global_topk_to_gathered_ckv_kernel",
                {
                    "DCP_SIZE": dcp_size,
                    "DCP_INTERLEAVE": cp_kv_cache_interleave_size,
                    "NUM_TOPK_TOKENS": token_indices.shape[1],
                    "BLOCK_N": 128,
                },
            )
        )

    def mask_page_table(self, page_table, nsa_cache_seqlens):
        assert nsa_cache_seqlens.shape == page_table.shape[:1]
        self.calls.append(("_mask_page_table_after_nsa_len_kernel", {"width": page_table.shape[1]}))

    def filter_dcp_index(
        self,
        req_id,
        block_table,
        token_indices,
        dcp_size,
        dcp_rank,
        cp_kv_cache_interleave_size=1,
        BLOCK_SIZE=64,
        BLOCK_STRIDE_ROWS=None,
        NUM_TOPK_TOKENS=2048,
        BLOCK_N=128,
        return_valid_counts=False,
        compact_valid_to_front=True,
    ):
        assert 0 <= dcp_rank < dcp_size
        assert BLOCK_SIZE % cp_kv_cache_interleave_size == 0
        assert token_indices.shape[1] == NUM_TOPK_TOKENS
        self.calls.append(
            (
                "triton_filter_and_convert_dcp_index",
                {
                    "DCP_SIZE": dcp_size,
                    "DCP_RANK": dcp_rank,
                    "DCP_INTERLEAVE": cp_kv_cache_interleave_size,
                    "BLOCK_SIZE": BLOCK_SIZE,
                    "BLOCK_STRIDE_ROWS": BLOCK_STRIDE_ROWS,
                    "NUM_TOPK_TOKENS": NUM_TOPK_TOKENS,
                    "max_num_blocks_per_req": block_table.shape[1],
                    "COUNT_VALID": return_valid_counts,
                },
            )
        )

    def prefill_chunk_metadata(
        self,
        start_idx,
        end_idx,
        query_start_loc,
        query_start_loc_cpu,
        uncompressed_seq_lens,
        compressed_seq_lens,
        compressed_seq_lens_cpu,
        block_table,
        compress_ratio,
        query_slice=None,
        skip_kv_gather=False,
        dcp_rank=0,
        dcp_world_size=1,
        cp_kv_cache_interleave_size=1,
    ):
        # as vLLM's indexer builder: whole batch tensors, the prefills from start_idx on
        assert query_start_loc.shape[0] >= end_idx + 1 and uncompressed_seq_lens.shape[0] >= end_idx
        self.calls.append(
            (
                "_build_prefill_chunk_metadata_kernel",
                {
                    "DCP_WORLD": dcp_world_size,
                    "DCP_RANK": dcp_rank,
                    "DCP_INTERLEAVE": cp_kv_cache_interleave_size,
                    "COMPRESS_RATIO": compress_ratio,
                    "query_len": int(query_start_loc_cpu[end_idx] - query_start_loc_cpu[start_idx]),
                    "start_idx": start_idx,
                    "seq_lens_byte_offset": 4 * start_idx,
                },
            )
        )

    def correct_attn_out(self, out, lses, cp_rank, ctx, is_lse_base_on_e=True):
        assert lses.shape[1:] == out.shape[:2] and ctx == "ctx"
        self.calls.append(
            (
                "correct_attn_out",
                {
                    "N": lses.shape[0],
                    "HEAD_DIM": out.shape[2],
                    "cp_rank": cp_rank,
                    "is_lse_base_on_e": is_lse_base_on_e,
                },
            )
        )

    def of(self, name: str) -> list[dict]:
        return [c for n, c in self.calls if n == name]


@pytest.fixture
def fork(monkeypatch) -> Launches:
    """The runtime's launchers as recorders; the provider's calls build torch tensors, so
    only the tests that launch need torch (the --list tests run without it)."""
    need_serving("torch")
    launches = Launches()
    for name, module in launches.modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    return launches


# ------------------------------------------------------------------ Triton helpers


@pytest.mark.parametrize("line", LINES)
@pytest.mark.parametrize(("dcp", "interleave"), DCP)
def test_triton_helpers_launch_with_the_runtime_constexprs(fork, line, dcp, interleave):
    # The profile says DCP4 / interleave 1 (or DCP1); the live runtime decides.
    sets = ("parallel.decode_context=1",) if dcp == 1 else ()
    ctx = context(line, *sets, runner=runner(dcp, interleave, rank=dcp - 1), rank=7)
    result = load("triton").run(ctx)
    if dcp == 1:
        assert fork.calls == [] and result.warmed == 0 and result.skipped == ""
        return
    assert result.skipped == ""
    gathered = line == "gilded-gnosis"  # CKV gather: VLLM_B12X_MLA_CKV_GATHER=1 on that line
    names = {n for n, _ in fork.calls}
    # the mask runs on every DCP > 1 decode of the B12X backend, gathered or not
    assert names == set(ALL_KERNELS) - (set() if gathered else {ALL_KERNELS[0]})
    if gathered:
        assert fork.of(ALL_KERNELS[0]) == [
            {"DCP_SIZE": 4, "DCP_INTERLEAVE": interleave, "NUM_TOPK_TOKENS": 2048, "BLOCK_N": 128}
        ]
        assert fork.of("_mask_page_table_after_nsa_len_kernel") == [{"width": 2048}]
    chunks = fork.of("_build_prefill_chunk_metadata_kernel")
    assert [c["query_len"] for c in chunks] == [1, 16, 17] * 4
    # behind 0-3 decode rows: the seq-len slice is 16-byte aligned only at 0
    assert sorted({c["seq_lens_byte_offset"] % 16 for c in chunks}) == [0, 4, 8, 12]
    assert {(c["DCP_WORLD"], c["DCP_RANK"], c["DCP_INTERLEAVE"], c["COMPRESS_RATIO"])
            for c in chunks} == {(4, 3, interleave, 1)}  # fmt: skip
    assert fork.of("triton_filter_and_convert_dcp_index") == [
        {
            "DCP_SIZE": 4,
            "DCP_RANK": 3,
            "DCP_INTERLEAVE": interleave,
            "BLOCK_SIZE": 64,
            "BLOCK_STRIDE_ROWS": 64,
            "NUM_TOPK_TOKENS": 2048,
            "max_num_blocks_per_req": 2048,  # 524,288 tokens / (64 x 4)
            "COUNT_VALID": True,
        },
        {  # the MTP draft, replicated over DCP ranks (VLLM_DCP_SHARD_DRAFT unset): DCP 1
            "DCP_SIZE": 1,
            "DCP_RANK": 0,
            "DCP_INTERLEAVE": 1,
            "BLOCK_SIZE": 64,
            "BLOCK_STRIDE_ROWS": 64,
            "NUM_TOPK_TOKENS": 2048,
            "max_num_blocks_per_req": 8192,  # 524,288 tokens / 64
            "COUNT_VALID": True,
        },
    ]
    merges = fork.of("correct_attn_out")
    # B12X returns natural-log LSEs on both fork lines: the base-2 variant is never run.
    assert {(m["N"], m["HEAD_DIM"], m["cp_rank"], m["is_lse_base_on_e"]) for m in merges} == {
        (4, 512, 3, True)
    }
    # one launch per kernel, the DCP1 draft filter a second one of its kernel
    assert result.warmed == len(names) + 1 and len(result.specializations) == result.warmed


def test_the_dcp_rank_is_the_runners_not_the_global_rank(fork):
    ctx = context("gilded-gnosis", runner=runner(4, 1, rank=1), rank=6)
    load("triton").run(ctx)
    filters = fork.of("triton_filter_and_convert_dcp_index")
    ranks = {c["DCP_RANK"] for c in filters if c["DCP_SIZE"] > 1}  # not the DCP1 draft's
    assert ranks == {1} and {c["cp_rank"] for c in fork.of("correct_attn_out")} == {1}


def test_a_runner_without_the_dcp_parameters_is_reported_not_defaulted(fork):
    legacy = SimpleNamespace(dcp_size=4, cp_interleave=1, dcp_rank=0)  # names vLLM never had
    result = load("triton").run(context("gilded-gnosis", runner=legacy))
    assert fork.calls == [] and result.warmed == 0
    assert "does not expose the DCP parameters" in result.skipped
    assert "decode_context_parallel_size" in result.skipped


def test_a_kernel_found_nowhere_is_reported_missing(fork, monkeypatch):
    gather = next(k for k in tk.kernels(context("gilded-gnosis")) if k.name == ALL_KERNELS[0])
    for candidate in gather.candidates:
        monkeypatch.setitem(sys.modules, candidate.partition(":")[0], None)
    result = load("triton").run(context("gilded-gnosis", runner=runner(4, 1, 0)))
    assert result.skipped.startswith("missing _map_global_topk_to_gathered_ckv_kernel: not in ")
    assert f"{tk.BACKEND}:_map_global_topk_to_gathered_ckv" in result.skipped
    assert "sparkinfer.attention._shared.mla.dcp_ckv_mapping" in result.skipped
    assert "missing _mask_page_table_after_nsa_len_kernel: not in " in result.skipped
    assert result.warmed == 4  # the others still ran (the draft's DCP1 filter among them)


def test_a_launcher_that_refuses_is_reported(fork, monkeypatch):
    def refuses(*args, **kwargs):
        raise AssertionError("DCP sparse index conversion supports only interleave 1")

    monkeypatch.setattr(
        sys.modules[tk.SPARSE_UTILS], "triton_filter_and_convert_dcp_index", refuses
    )
    result = load("triton").run(context("b12x-fork", runner=runner(4, 64, 0)))
    assert "triton_filter_and_convert_dcp_index failed: AssertionError" in result.skipped


def test_upstream_merges_both_lse_bases(fork):
    # an fp8 GLM-5.2 (not the EXL3 checkpoint, which upstream does not load) on a line whose
    # FLASHMLA_SPARSE returns the decode LSE (0.26 refuses DCP there)
    sets = ("model.quantization=fp8", "~model.checkpoint", "vllm.release=0.33")
    ctx = context("b12x-fork", "vllm.runtime=upstream", "vllm.attention_backend=FLASHMLA_SPARSE",
                  *sets, runner=runner(4, 1, 0))  # fmt: skip
    load("triton").run(ctx)
    assert {m["is_lse_base_on_e"] for m in fork.of("correct_attn_out")} == {True, False}
    assert not fork.of("_map_global_topk_to_gathered_ckv_kernel")  # a B12X-backend kernel


# ------------------------------------------------------------------ b12x provider


@pytest.mark.parametrize(("dcp", "interleave"), DCP)
def test_b12x_provider_on_gilded_gnosis_says_why(dcp, interleave):
    sets = ("parallel.decode_context=1",) if dcp == 1 else ()
    ctx = context("gilded-gnosis", *sets, runner=runner(dcp, interleave, 0))
    provider = load("b12x")
    assert not provider.applies(ctx)
    assert provider.run(ctx).skipped == (
        "runtime gilded-gnosis runs sparkinfer; its plans are prewarmed through the "
        "runtime provider"
    )


class _Experts:
    """Stands in for b12x's PreparedExperts (isinstance is all the lookup asks)."""

    num_experts, hidden_size, intermediate_size = 256, 6144, 512


def _model(*modules) -> SimpleNamespace:
    return SimpleNamespace(modules=lambda: iter(modules))


@pytest.fixture
def exl3(monkeypatch):
    """The fork's EXL3 module with its module-level runtime caches, and no real prepare."""
    from launcher.runtime.prewarm.model import moe_units
    from launcher.runtime.prewarm.providers import b12x

    module = ModuleType(moe_units.EXL3_MODULES[0])
    module._RANK_SLICED_RUNTIMES = {}
    module._MIXED_TRELLIS_RUNTIMES = {}
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(moe_units, "_prepared_experts_type", lambda: _Experts)
    monkeypatch.setattr(b12x.B12xProvider, "build_requests", lambda self, ctx: {})
    monkeypatch.setattr(b12x.B12xProvider, "moe_requests", lambda self, ctx: [])
    return module


@pytest.mark.parametrize(("dcp", "interleave"), DCP)
def test_b12x_fork_finds_moe_units_in_the_runtime_dicts(exl3, dcp, interleave):
    need_serving("b12x")
    sets = ("parallel.decode_context=1",) if dcp == 1 else ()
    exl3._RANK_SLICED_RUNTIMES[("target", 0)] = {"trellis_plan": "p", "prefill_plan": "q"}
    exl3._MIXED_TRELLIS_RUNTIMES[("draft", 0)] = {"decode": {}, "prefill": {}}
    live = runner(dcp, interleave, 0)
    live.model = _model(SimpleNamespace())
    lines: list[str] = []
    ctx = context("b12x-fork", *sets, runner=live)
    ctx.log = lines.append
    provider = load("b12x")
    result = provider.run(ctx)
    assert result.skipped == ""
    assert provider.units.total == 2
    assert lines == [
        "b12x prewarm: fused_moe: 2 unit(s): 0 PreparedExperts attribute(s), runtime dicts: "
        "_RANK_SLICED_RUNTIMES 1, _MIXED_TRELLIS_RUNTIMES 1; 2 compiled by the runtime's own "
        "forward at the token counts it ran (b12x plans only PreparedExperts)"
    ]


def test_b12x_fork_finds_prepared_experts_attributes(exl3):
    need_serving("b12x")
    layer = SimpleNamespace(exl3_trellis_weights=_Experts())
    live = runner(4, 1, 0)
    live.model = _model(layer, SimpleNamespace(other=_Experts()))  # same shape: one unit
    provider = load("b12x")
    assert provider.run(context("b12x-fork", runner=live)).skipped == ""
    assert len(provider.units.experts) == 1 and provider.units.total == 1


def test_zero_moe_units_after_the_first_forward_is_a_loud_warning(exl3, caplog):
    need_serving("b12x")
    live = runner(4, 1, 0)
    live.model = _model(SimpleNamespace())
    ctx = context("b12x-fork", runner=live)
    with caplog.at_level(logging.WARNING, logger="launcher.runtime.prewarm.providers.b12x"):
        result = load("b12x").run(ctx)
        assert result.skipped == "fused_moe: looked up after the model's first forward"
        run_after_forward(ctx)  # the worker's: no scratch forward ran
    assert result.skipped.startswith(
        "fused_moe: 0 units found after the model's first forward for an EXL3 MoE deployment"
    )
    assert "_RANK_SLICED_RUNTIMES" in result.skipped and "_MIXED_TRELLIS_RUNTIMES" in result.skipped
    assert any("0 units found" in r.getMessage() for r in caplog.records)


# ------------------------------------------------------------------ prewarm --list


def listing(*args: str) -> str:
    from launcher.cli import cli

    result = CliRunner().invoke(cli, ["prewarm", *args, "--list"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def triton_lines(out: str) -> dict[str, str]:
    """Kernel name -> its first line (the target's; the MTP draft's DCP1 variant follows)."""
    lines = out.split("triton: ", 1)[1].splitlines()[1:]
    found: dict[str, str] = {}
    for line in lines:
        if line.startswith("  rank ") or not line.startswith("  "):
            break  # rank 0's list ends: the other ranks' differences or the next provider
        found.setdefault(line.split()[0], line.strip())
    return found


def test_list_shows_what_each_other_rank_compiles_instead():
    out = listing(GLM).split("triton: ", 1)[1]
    for rank in (1, 2, 3):
        block = out.split(f"  rank {rank}:\n", 1)[1].split("  rank ", 1)[0]
        assert f"DCP_RANK={rank}" in block and f"cp_rank={rank}" in block
        assert "DCP_RANK=0" not in block


def test_list_shows_each_kernel_with_the_runtime_constexprs():
    out = listing(GLM)
    assert out.splitlines()[0] == (
        "b12x: runtime gilded-gnosis runs sparkinfer; its plans are prewarmed through the "
        "runtime provider"
    )
    lines = triton_lines(out)
    assert set(lines) == {*ALL_KERNELS, SEED}
    assert "DCP_SIZE=4 DCP_INTERLEAVE=1 NUM_TOPK_TOKENS=2048 BLOCK_N=128" in lines[ALL_KERNELS[0]]
    assert (
        "DCP_WORLD=4 DCP_RANK=0 DCP_INTERLEAVE=1 COMPRESS_RATIO=1 BLOCK_SIZE=1024"
        in (lines["_build_prefill_chunk_metadata_kernel"])
    )
    assert "width=2048 BLOCK_N=128" in lines["_mask_page_table_after_nsa_len_kernel"]
    assert "max_num_blocks_per_req=2048" in lines["triton_filter_and_convert_dcp_index"]
    assert "is_lse_base_on_e=True" in lines["correct_attn_out"]
    assert "is_lse_base_on_e=False" not in out


def test_list_follows_the_profile():
    lines = triton_lines(listing(GLM, "--set", "parallel.interleave=64"))
    for name in (ALL_KERNELS[0], ALL_KERNELS[1], "triton_filter_and_convert_dcp_index"):
        assert "DCP_INTERLEAVE=64" in lines[name]
    dcp2 = triton_lines(listing(str(PROFILES / "glm52-dcp2.yaml")))
    assert "DCP_SIZE=2" in dcp2[ALL_KERNELS[0]] and "N=2" in dcp2["correct_attn_out"]
    dcp1 = listing(str(PROFILES / "glm52-dcp1.yaml"))
    assert set(triton_lines(dcp1)) == {SEED}  # MLA without DCP: only the seed
    no_gather = triton_lines(listing(GLM, "--set", "env.VLLM_B12X_MLA_CKV_GATHER=0"))
    assert ALL_KERNELS[0] not in no_gather and "correct_attn_out" in no_gather
    # the mask runs on every DCP decode, gathered or not
    assert "_mask_page_table_after_nsa_len_kernel" in no_gather


def test_list_adds_the_256_merge_when_the_output_is_projected_before_it():
    plain = listing(GLM)
    projected = listing(GLM, "--set", "env.VLLM_DCP_PROJECT_BEFORE_MERGE=1")
    assert "HEAD_DIM=256" not in plain and "HEAD_DIM=512" in plain
    assert "HEAD_DIM=256" in projected and "HEAD_DIM=512" in projected


def test_an_odd_max_model_len_changes_the_block_table_width():
    wide = triton_lines(listing(GLM))["triton_filter_and_convert_dcp_index"]
    odd = triton_lines(listing(GLM, "--set", "serving.max_model_len=524289"))
    assert "max_num_blocks_per_req=2048" in wide
    assert "max_num_blocks_per_req=2050" in odd["triton_filter_and_convert_dcp_index"]


def test_a_sharded_draft_drops_the_dcp1_variant():
    replicated = listing(GLM)
    sharded = listing(GLM, "--set", "env.VLLM_DCP_SHARD_DRAFT=1")
    assert "(the MTP draft, replicated: DCP 1)" in replicated
    assert "(the MTP draft, replicated: DCP 1)" not in sharded


def test_prefill_metadata_is_compiled_behind_decode_rows_off_16_byte_alignment():
    line = triton_lines(listing(GLM))["_build_prefill_chunk_metadata_kernel"]
    assert "prefills from request [0, 1, 2, 3]" in line and "aligned and not" in line


def test_list_on_the_b12x_fork_shows_the_runtime_caps():
    out = listing(GLM, "--set", "vllm.runtime=b12x-fork", "--set", "vllm.attention_backend=B12X")
    assert (
        "sparse_mla decode rows={1, 4, 8, 16, 32} heads=64 chunks=32 kv=nvfp4_ds_mla "
        "fp8-rope lse natural" in out
    )
    assert ALL_KERNELS[0] not in out  # that line gathers the CKV only for GLM5Next


def test_list_imports_neither_torch_nor_vllm():
    script = (
        "import sys\n"
        "from launcher.cli import cli\n"
        f"cli(['prewarm', {GLM!r}, '--list'], standalone_mode=False)\n"
        "heavy = [m for m in ('torch', 'vllm', 'b12x', 'triton') if m in sys.modules]\n"
        "print(__import__('json').dumps(heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout.splitlines()[-1]) == []


def test_a_launcher_without_dcp_arguments_is_noted(fork, monkeypatch):
    """An indexer whose chunk-metadata kernel has no DCP constexprs still runs, and says so."""

    def older(start_idx, end_idx, query_start_loc, *rest, query_slice=None, skip_kv_gather=False):
        fork.calls.append(("_build_prefill_chunk_metadata_kernel", {}))

    monkeypatch.setattr(sys.modules[tk.INDEXER], "build_prefill_chunk_metadata", older)
    result = load("triton").run(context("gilded-gnosis", runner=runner(4, 1, 0)))
    chunk = next(s for s in result.specializations if s.startswith(ALL_KERNELS[1]))
    assert chunk.endswith(
        "(this vLLM's launcher takes no cp_kv_cache_interleave_size, dcp_rank, dcp_world_size)"
    )
    assert len(fork.of(ALL_KERNELS[1])) == 3 * len(tk.PREFILL_ROW_OFFSETS)


class _TensorExperts:
    """Stands in for b12x 1.5.1's B12XFP4ExpertWeights (tensor-API prepare_weights)."""

    num_experts, hidden_size, intermediate_size = 256, 6144, 512


def test_moe_units_the_first_forward_creates_are_found_after_it(exl3, monkeypatch):
    """The fork fills its EXL3 MoE units on a layer's first forward: before the scratch
    stage's waves there are none, after them the provider finds and reports them."""
    need_serving("b12x")
    from launcher.runtime.prewarm.model import moe_units

    monkeypatch.setattr(moe_units, "_tensor_experts_type", lambda: _TensorExperts)
    layer = SimpleNamespace()
    live = runner(4, 1, 0)
    live.model = _model(layer)
    lines: list[str] = []
    ctx = context("b12x-fork", runner=live)
    ctx.log = lines.append
    provider = load("b12x")
    result = provider.run(ctx)
    assert provider.units is None and len(ctx.after_forward) == 1
    layer.exl3_weights = _TensorExperts()  # the serving waves' forward
    exl3._RANK_SLICED_RUNTIMES[("target", 0)] = {"trellis_plan": "p"}
    run_after_forward(ctx)
    assert result.skipped == "" and ctx.after_forward == []
    assert provider.units.total == 2 and len(provider.units.tensor_experts) == 1
    assert lines == [
        "b12x prewarm: fused_moe after the model's first forward: 2 unit(s): 0 "
        "PreparedExperts attribute(s), 1 B12XFP4ExpertWeights attribute(s), runtime dicts: "
        "_RANK_SLICED_RUNTIMES 1; 2 compiled by the runtime's own forward at the token "
        "counts it ran (b12x plans only PreparedExperts)"
    ]
