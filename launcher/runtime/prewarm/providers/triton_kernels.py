"""The DCP Triton helpers, compiled with the constexprs the runtime will use.

Under decode context parallelism the sparse-MLA backend runs a handful of small Triton
kernels whose constexprs carry the DCP size, interleave and rank, the top-k width and
the page size. vLLM compiles each on the first step that needs it (the first long
prompt for the full-CKV gather ones), after the KV cache is sized. This provider runs
each once on tiny tensors of the serving layout, through the runtime's own launcher
function, so the compile and its memory happen before sizing.

Each kernel is found by capability: its launcher is looked up in candidate modules in
order (the fork keeps them in the B12X backend, ``sparse_utils``, the indexer, or the
kernel package). A kernel found nowhere is reported as missing, never dropped.

DCP size, interleave and rank come from the live runtime inside a worker
(``vllm_config.parallel_config`` and the runner's ``dcp_rank``), from the profile when
listing without one. Nothing here imports torch or vLLM until ``run``.
"""

from __future__ import annotations

import importlib
import inspect
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from launcher.plan.b12x_sizing import ckv_gather
from launcher.runtime.prewarm import PrewarmContext, PrewarmResult
from launcher.runtime.prewarm.flow import NONE, Fact
from launcher.vllm.internals import group_paths, module_of
from launcher.vllm.lines import VllmLine

BACKEND = module_of("triton.b12x_backend")
SPARSE_UTILS = module_of("triton.filter_dcp_index")
INDEXER = module_of("triton.indexer_chunks")
CKV_MAPPING = "attention._shared.mla.dcp_ckv_mapping"
"""The full-CKV top-k remap in the kernel package (b12x or sparkinfer)."""
MAP_BLOCK_N = 128
"""Gilded Gnosis launches the CKV remap with fixed 128-column tiles."""
MASK_BLOCK_N = 128
CHUNK_METADATA_BLOCK = 1024
"""``build_prefill_chunk_metadata`` launches its kernel with BLOCK_SIZE=1024."""
TOKEN_ALIGNMENT = 128
"""vLLM pads block-table rows to whole 128-token runs."""
PREFILL_ROW_OFFSETS = (0, 1, 2, 3)
"""int32 rows a prefill's slice of the batch tensors starts at: 0 alone or first, 1-3 behind
decode rows (a 4-byte step: only 0 keeps Triton's 16-byte pointer alignment)."""
PROJECT_BEFORE_MERGE_ENV = "VLLM_DCP_PROJECT_BEFORE_MERGE"
"""Fork recipes for TP4/DCP4 project the attention output to v_head_dim before the DCP merge."""
SHARD_DRAFT_ENV = "VLLM_DCP_SHARD_DRAFT"
"""Unset: the MTP draft runs replicated, at DCP 1, with its own indexer and filter."""


@dataclass(frozen=True)
class Dcp:
    """Decode context parallelism as the runtime runs it."""

    size: int
    interleave: int
    rank: int
    source: str
    """``runtime`` (read from the live vLLM config) or ``profile``."""


class DcpUnreadable(LookupError):
    """The worker's runtime does not expose the DCP parameters where vLLM keeps them."""


def dcp_of(ctx: PrewarmContext) -> Dcp:
    """DCP size, interleave and rank: the live runtime's inside a worker, else the profile's.

    Raises:
        DcpUnreadable: a runner is present but lacks ``vllm_config.parallel_config``'s
            ``decode_context_parallel_size`` / ``cp_kv_cache_interleave_size`` or ``dcp_rank``
            (no default is assumed: a wrong DCP rank compiles the wrong kernels).
    """
    runner = ctx.model_runner
    if runner is None:
        p = ctx.profile.parallel
        return Dcp(p.decode_context, p.interleave, ctx.rank % p.decode_context, "profile")
    try:
        parallel = runner.vllm_config.parallel_config
        return Dcp(
            int(parallel.decode_context_parallel_size),
            int(parallel.cp_kv_cache_interleave_size),
            int(runner.dcp_rank),
            "runtime",
        )
    except AttributeError as exc:
        raise DcpUnreadable(
            f"the model runner does not expose the DCP parameters ({exc}); expected "
            "vllm_config.parallel_config.decode_context_parallel_size, "
            ".cp_kv_cache_interleave_size and the runner's dcp_rank"
        ) from None


@dataclass(frozen=True)
class Kernel:
    """One Triton kernel specialization and how to launch it through the runtime."""

    name: str
    constexprs: tuple[tuple[str, Any], ...]
    shapes: str
    candidates: tuple[str, ...]
    """``module:function`` launchers, tried in order."""
    launch: Callable[[Callable[..., Any], str], str | None]
    """Runs the found launcher once on the given device; returns a note, if any."""
    optional: bool = False
    """A kernel some vLLM lines lack: where it is absent nothing of it can compile late, so
    its absence is listed (an entry point ``missing``), not a problem."""

    @property
    def description(self) -> str:
        consts = " ".join(f"{k}={v}" for k, v in self.constexprs)
        return f"{self.name} {consts} {self.shapes}"


def _runtime(ctx: PrewarmContext) -> VllmLine:
    return ctx.deployment.runtime


def _b12x_sparse_mla(ctx: PrewarmContext) -> bool:
    """The fork's B12X sparse-MLA backend (either line) serves attention."""
    return ctx.facts.is_mla and ctx.deployment.b12x_sparse_mla


def _package_candidates(runtime: VllmLine, function: str) -> tuple[str, ...]:
    packages = [runtime.kernel_package] if runtime.kernel_package else []
    packages += [p for p in ("sparkinfer", "b12x") if p not in packages]
    return tuple(f"{pkg}.{CKV_MAPPING}:{function}" for pkg in packages)


# --------------------------------------------------------------------------- kernels


def _map_global_topk(ctx: PrewarmContext, dcp: Dcp) -> Iterator[Kernel]:
    """Full-CKV gather: global top-k ids -> slots of the all-gathered cache (prefill)."""
    if dcp.size <= 1 or not _b12x_sparse_mla(ctx) or not ckv_gather(ctx.deployment):
        return
    width = ctx.facts.index_topk or 2048
    seqs = ctx.profile.serving.max_num_seqs
    page = ctx.deployment.block_size

    def launch(fn: Callable[..., Any], device: str) -> None:
        import torch

        i32 = {"dtype": torch.int32, "device": device}
        rows = 2
        # As the builder: per-rank request tables sliced from (dcp, max_num_seqs) buffers.
        starts = torch.zeros((dcp.size, seqs), **i32)[:, :1]
        lens = torch.full((dcp.size, seqs), page, **i32)[:, :1]
        ids = torch.arange(width, **i32).repeat(rows, 1)
        fn(
            torch.zeros(rows, **i32),
            ids,
            starts,
            lens,
            torch.empty((rows, width), **i32),
            torch.empty(rows, **i32),
            dcp_size=dcp.size,
            cp_kv_cache_interleave_size=dcp.interleave,
            padded_rank_tokens=page,
        )

    yield Kernel(
        "_map_global_topk_to_gathered_ckv_kernel",
        (
            ("DCP_SIZE", dcp.size),
            ("DCP_INTERLEAVE", dcp.interleave),
            ("NUM_TOPK_TOKENS", width),
            ("BLOCK_N", MAP_BLOCK_N),
        ),
        f"top-k [T, {width}] int32, request tables [{dcp.size}, {seqs}]",
        (
            f"{BACKEND}:_map_global_topk_to_gathered_ckv",
            f"{BACKEND}:map_global_topk_to_gathered_ckv",
            *_package_candidates(_runtime(ctx), "map_global_topk_to_gathered_ckv"),
        ),
        launch,
    )


def _mask_page_table(ctx: PrewarmContext, dcp: Dcp) -> Iterator[Kernel]:
    """Mask selected slots past each row's causal length: every DCP > 1 decode of the B12X
    backend runs it, with or without the full-CKV gather."""
    if dcp.size <= 1 or not _b12x_sparse_mla(ctx):
        return
    width = ctx.facts.index_topk or 2048

    def launch(fn: Callable[..., Any], device: str) -> None:
        import torch

        rows = 2
        table = torch.zeros((rows, width), dtype=torch.int32, device=device)
        fn(table, torch.full((rows,), width // 2, dtype=torch.int32, device=device))

    yield Kernel(
        "_mask_page_table_after_nsa_len_kernel",
        (("width", width), ("BLOCK_N", MASK_BLOCK_N)),
        f"selected slots [T, {width}] int32",
        (f"{BACKEND}:_mask_page_table_after_nsa_len",),
        launch,
    )


def _prefill_chunk_metadata(ctx: PrewarmContext, dcp: Dcp) -> Iterator[Kernel]:
    """The DSA indexer's prefill chunk bounds, localized to this DCP rank."""
    if dcp.size <= 1 or not ctx.facts.has_indexer:
        return
    page = ctx.deployment.block_size

    def launch(fn: Callable[..., Any], device: str) -> str | None:
        import torch

        accepts = inspect.signature(fn).parameters
        dcp_args = {"dcp_rank": dcp.rank, "dcp_world_size": dcp.size}
        dcp_args["cp_kv_cache_interleave_size"] = dcp.interleave
        dropped = sorted(k for k in dcp_args if k not in accepts)
        dcp_args = {k: v for k, v in dcp_args.items() if k in accepts}
        # Query lengths 1, 16 and 17: Triton specializes ints equal to 1 and multiples of 16.
        # The indexer's builder passes the batch's tensors whole with the prefills' first
        # request index: behind 1-3 decode rows that slices the seq lens 4-12 bytes in, off
        # Triton's 16-byte pointer alignment: another specialization each way.
        for offset in PREFILL_ROW_OFFSETS:
            for reqs, qlen in ((1, 1), (2, 8), (1, 17)):
                total = offset + reqs
                starts_cpu = torch.arange(0, (total + 1) * qlen, qlen, dtype=torch.int32)
                lens_cpu = torch.tensor([4 * page + qlen] * total, dtype=torch.int32)
                fn(
                    offset,
                    total,
                    starts_cpu.to(device),
                    starts_cpu,
                    lens_cpu.to(device),
                    lens_cpu.to(device),
                    lens_cpu,
                    torch.zeros((total, 8), dtype=torch.int32, device=device),
                    1,
                    **dcp_args,
                )
        return f"this vLLM's launcher takes no {', '.join(dropped)}" if dropped else None

    yield Kernel(
        "_build_prefill_chunk_metadata_kernel",
        (
            ("DCP_WORLD", dcp.size),
            ("DCP_RANK", dcp.rank),
            ("DCP_INTERLEAVE", dcp.interleave),
            ("COMPRESS_RATIO", 1),
            ("BLOCK_SIZE", CHUNK_METADATA_BLOCK),
        ),
        "query lengths 1/16/17 (Triton's int specializations); prefills from request "
        f"{list(PREFILL_ROW_OFFSETS)} (seq-len pointer 16-byte aligned and not)",
        (f"{INDEXER}:build_prefill_chunk_metadata",),
        launch,
    )


def block_table_width(ctx: PrewarmContext, dcp: Dcp) -> int:
    """Columns of vLLM's block table: this rank's share of max_model_len in blocks,
    padded to whole 128-token runs (a constexpr of the DCP index filter)."""
    block = ctx.deployment.block_size
    blocks = math.ceil(ctx.profile.serving.max_model_len / (block * dcp.size))
    align = TOKEN_ALIGNMENT // math.gcd(TOKEN_ALIGNMENT, block)
    return math.ceil(blocks / align) * align


def _filter_dcp_index(ctx: PrewarmContext, dcp: Dcp, force: bool = False) -> Iterator[Kernel]:
    """Decode under DCP: keep this rank's top-k positions and turn them into its slots."""
    if not _b12x_sparse_mla(ctx) or (dcp.size <= 1 and not force):
        return
    width = ctx.facts.index_topk or 2048
    block = ctx.deployment.block_size
    columns = block_table_width(ctx, dcp)

    def launch(fn: Callable[..., Any], device: str) -> None:
        import torch

        accepts = inspect.signature(fn).parameters
        # The B12X backend passes the page's own rows (newer lines check cache page == block).
        extra = {"BLOCK_STRIDE_ROWS": block} if "BLOCK_STRIDE_ROWS" in accepts else {}
        rows = 2
        fn(
            torch.zeros(rows, dtype=torch.int32, device=device),
            torch.zeros((rows, columns), dtype=torch.int32, device=device),
            torch.arange(width, dtype=torch.int32, device=device).repeat(rows, 1),
            dcp_size=dcp.size,
            dcp_rank=dcp.rank,
            cp_kv_cache_interleave_size=dcp.interleave,
            BLOCK_SIZE=block,
            NUM_TOPK_TOKENS=width,
            return_valid_counts=True,
            **extra,
        )

    yield Kernel(
        "triton_filter_and_convert_dcp_index",
        (
            ("DCP_SIZE", dcp.size),
            ("DCP_RANK", dcp.rank),
            ("DCP_INTERLEAVE", dcp.interleave),
            ("BLOCK_SIZE", block),
            ("BLOCK_STRIDE_ROWS", block),
            ("NUM_TOPK_TOKENS", width),
            ("max_num_blocks_per_req", columns),
        ),
        f"top-k [T, {width}] int32, block table [R, {columns}]",
        (
            f"{SPARSE_UTILS}:triton_filter_and_convert_dcp_index",
            f"{BACKEND}:triton_filter_and_convert_dcp_index",
        ),
        launch,
    )


def _correct_attn_out(ctx: PrewarmContext, dcp: Dcp) -> Iterator[Kernel]:
    """The DCP LSE merge, with the LSE base the backend returns (natural for B12X); the
    all-to-all combine merges in its own kernel instead."""
    if dcp.size <= 1 or ctx.profile.parallel.dcp_comm_backend == "a2a":
        return
    p = ctx.profile
    heads = _merged_heads(ctx, dcp)
    rows = sorted({*ctx.deployment.capture_sizes, p.serving.max_num_seqs})
    for dim, base_e in ((d, b) for d in merge_head_dims(ctx) for b in _lse_bases(ctx)):

        def launch(
            fn: Callable[..., Any], device: str, base_e: bool = base_e, dim: int = dim
        ) -> None:
            import torch

            module = importlib.import_module(fn.__module__)
            context = getattr(module, "CPTritonContext", lambda: None)
            for b in rows:
                out = torch.zeros(b, heads, dim, device=device, dtype=torch.bfloat16)
                lses = torch.zeros(dcp.size, b, heads, device=device, dtype=torch.float32)
                fn(out, lses, dcp.rank, context(), is_lse_base_on_e=base_e)

        yield Kernel(
            "correct_attn_out",
            (("N", dcp.size), ("HEAD_DIM", dim), ("is_lse_base_on_e", base_e)),
            f"out [B, {heads}, {dim}] B in {rows}, cp_rank={dcp.rank}",
            group_paths("correct_attn_out"),
            launch,
        )


A2A_ENV = "VLLM_USE_B12X_DCP_A2A"
"""The fork's switch for its b12x all-to-all combine (b12x's own pool, not Triton)."""
DCP_OPS = module_of("triton.a2a_pack")


def uses_a2a(ctx: PrewarmContext) -> bool:
    p = ctx.profile
    return p.parallel.dcp_comm_backend == "a2a" or p.env.get(A2A_ENV) == "1"


def _a2a_combine(ctx: PrewarmContext, dcp: Dcp) -> Iterator[Kernel]:
    """The all-to-all DCP combine (``--dcp-comm-backend a2a``): vLLM packs each rank's
    partial output and LSE into one buffer, exchanges it, then unpacks and merges. The
    pack and unpack kernels compile here on local buffers (no exchange); the pack's masked
    variant is keyed by the batch's request count rounded up to a power of 2."""
    if dcp.size <= 1 or not uses_a2a(ctx):
        return
    p = ctx.profile
    heads = _merged_heads(ctx, dcp)
    per_rank = heads // dcp.size
    # The masked pack's key: the request count (an int: 1, a multiple of 16 or neither)
    # and its power of 2; every count up to max_num_seqs covers them (launches are cheap).
    rows = list(range(1, p.serving.max_num_seqs + 1))
    pow2 = sorted({1 << max(0, (n - 1).bit_length()) for n in rows})
    bases = _lse_bases(ctx)
    pack_dim = 2  # fp32 LSE in two bf16 slots

    for dim in merge_head_dims(ctx):

        def pack(fn: Callable[..., Any], device: str, dim: int = dim) -> None:
            import torch

            for b in rows:
                out = torch.zeros(b, heads, dim, device=device, dtype=torch.bfloat16)
                lse = torch.zeros(b, heads, device=device, dtype=torch.float32)
                send = torch.empty(
                    dcp.size, b, per_rank, dim + pack_dim, device=device, dtype=out.dtype
                )
                seq_lens = torch.ones(b, dtype=torch.int32, device=device)
                starts = torch.arange(b + 1, dtype=torch.int32, device=device)
                args = (out, lse, send, dcp.size, per_rank, dim, pack_dim)
                fn(*args)
                fn(*args, seq_lens=seq_lens, query_start_loc=starts)

        def unpack(fn: Callable[..., Any], device: str, dim: int = dim) -> None:
            import torch

            for b in sorted({1, rows[-1]}):  # B only scales strides that stay % 16
                recv = torch.zeros(
                    dcp.size, b, per_rank, dim + pack_dim, device=device, dtype=torch.bfloat16
                )
                for base_e in bases:
                    fn(recv, dim, pack_dim, False, base_e)

        yield Kernel(
            "_dcp_a2a_pack_send_kernel",
            (
                ("N", dcp.size),
                ("HEAD_DIM", dim),
                ("H_PER_RANK", per_rank),
                ("LSE_PACK_DIM", pack_dim),
                ("HAS_MASK", "False,True"),
                ("NUM_SEQS_POW2", ",".join(map(str, pow2))),
            ),
            f"out [B, {heads}, {dim}] B in 1..{rows[-1]}",
            (f"{DCP_OPS}:_dcp_a2a_pack_send",),
            pack,
        )
        yield Kernel(
            "_dcp_a2a_unpack_combine_kernel",
            (
                ("N", dcp.size),
                ("HEAD_DIM", dim),
                ("IS_BASE_E", ",".join(map(str, bases))),
                ("RETURN_LSE", False),
                ("LSE_PACK_DIM", pack_dim),
            ),
            f"recv [{dcp.size}, B, {per_rank}, {dim + pack_dim}] B in 1..{rows[-1]}"
            + (
                f"; with {A2A_ENV}=1 the fork's b12x pool is left to the census"
                if p.env.get(A2A_ENV) == "1"
                else ""
            ),
            (f"{DCP_OPS}:_dcp_a2a_unpack_combine",),
            unpack,
        )


def _merged_heads(ctx: PrewarmContext, dcp: Dcp) -> int:
    """Heads a DCP merge sees: the rank's TP heads, all-gathered over the DCP group."""
    return max(1, ctx.facts.heads // ctx.profile.parallel.tensor) * dcp.size


def _lse_bases(ctx: PrewarmContext) -> tuple[bool, ...]:
    """``is_lse_base_on_e`` values the backend passes: natural only for the B12X lines."""
    return (True,) if _runtime(ctx).lse_scale == "natural" else (True, False)


def merge_head_dims(ctx: PrewarmContext) -> list[int]:
    """Head dims the DCP merge runs at: the latent (kv_lora_rank); also v_head_dim when the
    output is projected before the merge."""
    f = ctx.facts
    dims = [f.kv_lora_rank or f.head_dim]
    if ctx.profile.env.get(PROJECT_BEFORE_MERGE_ENV) == "1" and f.v_head:
        dims.append(f.v_head)
    return sorted(set(dims), reverse=True)


def _draft_at_dcp1(ctx: PrewarmContext, dcp: Dcp) -> Iterator[Kernel]:
    """The MTP draft, replicated over DCP ranks (the fork's default), runs its indexer and
    index filter at DCP 1: those specializations too."""
    p = ctx.profile
    if dcp.size <= 1 or not p.mtp_tokens or p.env.get(SHARD_DRAFT_ENV) == "1":
        return
    single = Dcp(1, 1, 0, dcp.source)
    for kernel in (*_filter_dcp_index(ctx, single, force=True),):
        yield Kernel(
            kernel.name,
            kernel.constexprs,
            kernel.shapes + " (the MTP draft, replicated: DCP 1)",
            kernel.candidates,
            kernel.launch,
        )


MERGE_OPS = module_of("triton.mask_empty_context")


def _mask_empty_context(ctx: PrewarmContext, dcp: Dcp) -> Iterator[Kernel]:
    """MLA's chunked-context prefill neutralizes context chunks that cover no keys before the
    merge. Only a step with such a chunk runs it, which the serving waves do not always form
    (the H200 compiled it late on boot 1 of the GLM tier model): a seed launch per int and
    alignment class gives the key enumeration (``keys``) the kernel's argument types."""
    if not ctx.facts.is_mla:
        return
    heads = max(1, ctx.facts.heads // ctx.profile.parallel.tensor)
    dim = ctx.facts.kv_lora_rank or ctx.facts.head_dim

    def launch(fn: Callable[..., Any], device: str) -> None:
        import torch

        i32 = {"dtype": torch.int32, "device": device}
        for tokens, reqs in ((1, 1), (16, 2), (17, 2)):
            lse = torch.zeros(heads, tokens, dtype=torch.float32, device=device)
            out = torch.zeros(tokens, heads, dim, dtype=torch.bfloat16, device=device)
            # query offsets [0, 1, .., T] behind one padding element; empty context chunks
            starts = torch.tensor([0, 0, *range(1, reqs), tokens], **i32)
            empty = torch.zeros(reqs + 2, **i32)
            # a fresh (16-byte aligned) tensor, then a slice 4 bytes in: the prefills' rows
            # behind a decode row
            fn(lse, out, starts[1:].clone(), empty[1:].clone())
            fn(lse, out, starts[1:], empty[1:])

    yield Kernel(
        "mask_empty_context_kernel",
        (("NUM_HEADS", heads), ("BLOCK_SIZE", 128), ("BLOCK_HEADS", 8)),
        f"LSE [{heads}, T] fp32, T in 1/16/17, 1-2 prefills, slices aligned and not",
        (f"{MERGE_OPS}:mask_empty_context",),
        launch,
        optional=True,  # vLLM 0.26 has it; 0.32 merges without it
    )


TARGETS: tuple[Callable[[PrewarmContext, Dcp], Iterator[Kernel]], ...] = (
    _mask_empty_context,
    _map_global_topk,
    _prefill_chunk_metadata,
    _mask_page_table,
    _filter_dcp_index,
    _draft_at_dcp1,
    _correct_attn_out,
    _a2a_combine,
)


def kernels(ctx: PrewarmContext, dcp: Dcp | None = None) -> list[Kernel]:
    """Every kernel specialization the deployment runs, with its constexprs."""
    if ctx.profile.hardware.gpu == "cpu":
        return []
    dcp = dcp or dcp_of(ctx)
    return [k for target in TARGETS for k in target(ctx, dcp)]


def find_launcher(kernel: Kernel) -> tuple[Callable[..., Any] | None, str]:
    """The first candidate launcher that imports, and where it was found (or what was tried)."""
    for candidate in kernel.candidates:
        module_name, _, attr = candidate.partition(":")
        try:
            module = importlib.import_module(module_name)
        except Exception:  # absent in this vLLM line, or fails to import without a GPU
            continue
        fn = getattr(module, attr, None)
        if callable(fn):
            return fn, candidate
    return None, ", ".join(kernel.candidates)


class TritonProvider:
    name = "triton"
    provides = frozenset({Fact.LAUNCHED})
    needs = uses = NONE

    def applies(self, ctx: PrewarmContext) -> bool:
        # The profile's DCP is what the launcher passes to vLLM; run() reads the live one.
        return bool(kernels(ctx, dcp_of(_without_runner(ctx))))

    def specializations(self, ctx: PrewarmContext) -> list[str]:
        return [k.description for k in kernels(ctx)]

    def run(self, ctx: PrewarmContext) -> PrewarmResult:
        from launcher.runtime import jit_watch

        result = PrewarmResult(self.name)
        start = time.perf_counter()
        try:
            dcp = dcp_of(ctx)
        except DcpUnreadable as exc:
            result.skipped = str(exc)
            return result
        before = jit_watch.loaded()
        problems = []
        for kernel in kernels(ctx, dcp):
            fn, where = find_launcher(kernel)
            if fn is None and kernel.optional:
                result.entry_points.append(
                    {"name": kernel.name, "status": "missing", "kernels": 0,
                     "detail": f"not in this vLLM ({where}): nothing of it to compile"}
                )  # fmt: skip
                continue
            if fn is None:
                problems.append(f"missing {kernel.name}: not in {where}")
                continue
            try:
                note = kernel.launch(fn, ctx.device)
            except Exception as exc:  # the runtime would fail the same way: say so, go on
                problems.append(f"{kernel.name} failed: {type(exc).__name__}: {exc}")
                continue
            result.warmed += 1
            note = f" ({note})" if note else ""
            result.specializations.append(f"{kernel.description} via {where}{note}")
        result.compiled = sum(jit_watch.new_since(before).values())
        result.skipped = "; ".join(problems)
        result.seconds = time.perf_counter() - start
        return result

    def freeze(self, ctx: PrewarmContext, on_late_compile, *, strict: bool = False) -> None:
        """Late Triton compiles are caught by ``runtime.jit_watch``, which the worker arms."""


def _without_runner(ctx: PrewarmContext) -> PrewarmContext:
    from dataclasses import replace

    return replace(ctx, model_runner=None)
