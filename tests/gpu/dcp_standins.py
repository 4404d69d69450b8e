"""Triton kernels of our own behind the fork's DCP-helper launcher signatures.

The device has no vLLM, so the fork's kernels are not there. These kernels take the same
arguments and constexpr names and are launched the way the fork's launcher functions
launch theirs (strides and counts as plain ints, BLOCK_N=128, BLOCK_SIZE=1024), which is
what decides Triton's specializations: ints equal to 1 and multiples of 16 are
specialized, constexprs are part of the key. The arithmetic is the interleaved DCP
sharding every DCP kernel shares (token t lives on rank (t // I) % D).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


class CPTritonContext:
    """What vLLM's correct_attn_out takes to cache its launch; unused here."""


@triton.jit
def _map_global_topk_to_gathered_ckv_kernel(
    req_ptr,
    tok_ptr,
    starts_ptr,
    lens_ptr,
    out_ptr,
    count_ptr,
    starts_s0,
    starts_s1,
    lens_s0,
    lens_s1,
    tok_s0,
    tok_s1,
    out_s0,
    out_s1,
    padded_rank_tokens,
    DCP_SIZE: tl.constexpr,
    DCP_INTERLEAVE: tl.constexpr,
    NUM_TOPK_TOKENS: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    inside = cols < NUM_TOPK_TOKENS
    req = tl.load(req_ptr + row)
    tok = tl.load(tok_ptr + row * tok_s0 + cols * tok_s1, mask=inside, other=-1)
    owner = (tok // DCP_INTERLEAVE) % DCP_SIZE
    local = (tok // (DCP_SIZE * DCP_INTERLEAVE)) * DCP_INTERLEAVE + tok % DCP_INTERLEAVE
    ok = inside & (tok >= 0)
    start = tl.load(starts_ptr + owner * starts_s0 + req * starts_s1, mask=ok, other=0)
    length = tl.load(lens_ptr + owner * lens_s0 + req * lens_s1, mask=ok, other=0)
    ok = ok & (local < length)
    tl.store(
        out_ptr + row * out_s0 + cols * out_s1, owner * padded_rank_tokens + start + local, mask=ok
    )
    tl.atomic_add(count_ptr + row, tl.sum(ok.to(tl.int32)))


def map_global_topk(req_ids, token_indices, starts, lens, out, counts, *, dcp_size,
                    cp_kv_cache_interleave_size, padded_rank_tokens):  # fmt: skip
    block_n = 128
    out.fill_(-1)
    counts.zero_()
    grid = (token_indices.shape[0], triton.cdiv(token_indices.shape[1], block_n))
    _map_global_topk_to_gathered_ckv_kernel[grid](
        req_ids, token_indices, starts, lens, out, counts,
        starts.stride(0), starts.stride(1), lens.stride(0), lens.stride(1),
        token_indices.stride(0), token_indices.stride(1), out.stride(0), out.stride(1),
        padded_rank_tokens,
        DCP_SIZE=dcp_size, DCP_INTERLEAVE=cp_kv_cache_interleave_size,
        NUM_TOPK_TOKENS=token_indices.shape[1], BLOCK_N=block_n,
    )  # fmt: skip


@triton.jit
def _mask_page_table_after_nsa_len_kernel(
    table_ptr, len_ptr, s0, s1, width: tl.constexpr, BLOCK_N: tl.constexpr
):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    n = tl.load(len_ptr + row)
    tl.store(table_ptr + row * s0 + cols * s1, -1, mask=(cols < width) & (cols >= n))


def mask_page_table(page_table, lengths):
    block_n = 128
    grid = (page_table.shape[0], triton.cdiv(page_table.shape[1], block_n))
    _mask_page_table_after_nsa_len_kernel[grid](
        page_table, lengths, page_table.stride(0), page_table.stride(1),
        page_table.shape[1], BLOCK_N=block_n,
    )  # fmt: skip


@triton.jit
def _build_prefill_chunk_metadata_kernel(
    qsl_ptr,
    seq_ptr,
    ks_ptr,
    query_slice_start,
    query_slice_stop,
    DCP_RANK,
    DCP_WORLD,
    DCP_INTERLEAVE,
    BLOCK_SIZE: tl.constexpr,
    COMPRESS_RATIO: tl.constexpr,
):
    b = tl.program_id(0)
    q0 = tl.load(qsl_ptr + b)
    qlen = tl.load(qsl_ptr + b + 1) - q0
    start = tl.load(seq_ptr + b) - qlen
    for i in range(0, qlen, BLOCK_SIZE):
        off = i + tl.arange(0, BLOCK_SIZE)
        pos = q0 + off
        keep = (off < qlen) & (pos >= query_slice_start) & (pos < query_slice_stop)
        visible = (start + 1 + off) // COMPRESS_RATIO
        mine = (visible // (DCP_WORLD * DCP_INTERLEAVE)) * DCP_INTERLEAVE + tl.minimum(
            visible % (DCP_WORLD * DCP_INTERLEAVE) - DCP_RANK * DCP_INTERLEAVE, DCP_INTERLEAVE
        )
        tl.store(ks_ptr + pos - query_slice_start, mine, mask=keep)


def build_prefill_chunk_metadata(start_idx, end_idx, query_start_loc, query_start_loc_cpu,
                                 uncompressed_seq_lens, compressed_seq_lens,
                                 compressed_seq_lens_cpu, block_table, compress_ratio,
                                 query_slice=None, skip_kv_gather=False, dcp_rank=0,
                                 dcp_world_size=1, cp_kv_cache_interleave_size=1):  # fmt: skip
    qsl = query_start_loc[start_idx : end_idx + 1] - query_start_loc[start_idx]
    total = int(query_start_loc_cpu[end_idx] - query_start_loc_cpu[start_idx])
    qs_start, qs_stop = (query_slice.start, query_slice.stop) if query_slice else (0, total)
    ks = torch.empty(max(1, qs_stop - qs_start), dtype=torch.int32, device=qsl.device)
    _build_prefill_chunk_metadata_kernel[(end_idx - start_idx,)](
        qsl, uncompressed_seq_lens[start_idx:end_idx], ks, qs_start, qs_stop,
        dcp_rank, dcp_world_size, cp_kv_cache_interleave_size,
        BLOCK_SIZE=1024, COMPRESS_RATIO=compress_ratio,
    )  # fmt: skip
    return ks


@triton.jit
def _filter_dcp_index_kernel(
    req_ptr,
    bt_ptr,
    tok_ptr,
    out_ptr,
    count_ptr,
    bt_s0,
    bt_s1,
    tok_s0,
    tok_s1,
    max_num_blocks_per_req: tl.constexpr,
    BLOCK_SIZE: tl.constexpr,
    BLOCK_STRIDE_ROWS: tl.constexpr,
    NUM_TOPK_TOKENS: tl.constexpr,
    BLOCK_N: tl.constexpr,
    DCP_SIZE: tl.constexpr,
    DCP_RANK: tl.constexpr,
    DCP_INTERLEAVE: tl.constexpr,
):
    row = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    req = tl.load(req_ptr + row)
    tok = tl.load(tok_ptr + row * tok_s0 + cols * tok_s1, mask=cols < NUM_TOPK_TOKENS, other=-1)
    mine = (tok >= 0) & ((tok // DCP_INTERLEAVE) % DCP_SIZE == DCP_RANK)
    local = (tok // (DCP_SIZE * DCP_INTERLEAVE)) * DCP_INTERLEAVE + tok % DCP_INTERLEAVE
    block = local // BLOCK_SIZE
    mine = mine & (block < max_num_blocks_per_req)
    page = tl.load(bt_ptr + req * bt_s0 + block * bt_s1, mask=mine, other=0)
    slot = tl.where(mine, page * BLOCK_STRIDE_ROWS + local % BLOCK_SIZE, -1)
    tl.store(out_ptr + row * tok_s0 + cols * tok_s1, slot, mask=cols < NUM_TOPK_TOKENS)
    tl.atomic_add(count_ptr + row, tl.sum(mine.to(tl.int32)))


def filter_dcp_index(req_id, block_table, token_indices, dcp_size, dcp_rank,
                     cp_kv_cache_interleave_size=1, BLOCK_SIZE=64, BLOCK_STRIDE_ROWS=None,
                     NUM_TOPK_TOKENS=2048, BLOCK_N=128, return_valid_counts=False,
                     compact_valid_to_front=True):  # fmt: skip
    out = torch.empty_like(token_indices)
    counts = torch.zeros(token_indices.shape[0], dtype=torch.int32, device=out.device)
    grid = (token_indices.shape[0], triton.cdiv(NUM_TOPK_TOKENS, BLOCK_N))
    _filter_dcp_index_kernel[grid](
        req_id, block_table, token_indices, out, counts,
        block_table.stride(0), block_table.stride(1),
        token_indices.stride(0), token_indices.stride(1),
        block_table.shape[1], BLOCK_SIZE, BLOCK_STRIDE_ROWS or BLOCK_SIZE,
        NUM_TOPK_TOKENS, BLOCK_N, dcp_size, dcp_rank, cp_kv_cache_interleave_size,
    )  # fmt: skip
    return (out, counts) if return_valid_counts else out


@triton.jit
def _correct_attn_out_kernel(
    out_ptr,
    lse_ptr,
    out_s0,
    out_s1,
    lse_s0,
    lse_s1,
    cp_rank,
    N: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    BASE_E: tl.constexpr,
):
    b = tl.program_id(0)
    h = tl.program_id(1)
    best = tl.full((), float("-inf"), tl.float32)
    for r in tl.static_range(N):
        best = tl.maximum(best, tl.load(lse_ptr + r * lse_s0 + b * lse_s1 + h))
    mine = tl.load(lse_ptr + cp_rank * lse_s0 + b * lse_s1 + h)
    scale = tl.exp(mine - best) if BASE_E else tl.exp2(mine - best)
    d = tl.arange(0, HEAD_DIM)
    ptr = out_ptr + b * out_s0 + h * out_s1 + d
    tl.store(ptr, (tl.load(ptr).to(tl.float32) * scale).to(out_ptr.dtype.element_ty))


def correct_attn_out(out, lses, cp_rank, ctx, is_lse_base_on_e=True):
    _correct_attn_out_kernel[(out.shape[0], out.shape[1])](
        out, lses, out.stride(0), out.stride(1), lses.stride(0), lses.stride(1), cp_rank,
        N=lses.shape[0], HEAD_DIM=out.shape[2], BASE_E=is_lse_base_on_e,
    )  # fmt: skip
    return out, lses
