"""Documented estimates for the components no header or measurement gives.

Each returns ``(bytes, detail)``; the detail is the formula, so a reader of the
plan can check it. A measured calibration record replaces every one of these.
"""

from __future__ import annotations

from launcher.deployment import Deployment
from launcher.plan.catalog import GpuKind
from launcher.plan.model import ModelFacts
from launcher.profile.schema import Profile
from launcher.units import KiB, MiB

# CUDA context, cuBLAS/cuBLASLt workspaces and the caching allocator's first segment:
# about 560 MiB on current drivers; NCCL communicators about 256 MiB for the TP group
# and 128 MiB for each further group (DCP, PP).
# Measured on an H200 (torch 2.11, CUDA 13, NCCL 2.28.9; benchmarks/cuda_context.py,
# docs/benchmarks.md): the context takes 620 MiB, cuBLAS 118 MiB more; a 2-rank NCCL
# communicator with P2P 840 MiB, without P2P 384 MiB. Other cards and drivers differ:
# these stay estimates until a run on the real cards measures them.
CONTEXT_BYTES = 740 * MiB
NCCL_TP_BYTES = 840 * MiB
NCCL_GROUP_BYTES = 384 * MiB
# Device memory per captured graph and decoder layer, fitted to the published capture of GLM-5.2
# 3.42 bpw on 4x RTX PRO 6000 (C12, graphs to 48, FULL_AND_PIECEWISE: 0.74 GiB per rank).
GRAPH_LAYER_BYTES = 810 * KiB
# Until a run measures it, the headroom formula of launcher.gpu.measure.jit_headroom applied
# to the planned workspaces as the prewarm's peak, with a 2.5x margin on its 10 %: a full
# prewarm leaves only what comes and goes plus a margin (the H200 test: 1.5 GiB for a
# workload with a 1 GiB scratch and 3.9 GiB of local memory, docs/benchmarks.md).
JIT_HEADROOM_FRACTION = 0.25
JIT_HEADROOM_FLOOR = 256 * MiB
# With a B12X backend the floor is fitted to the field: on the published 3.42 bpw C12
# deployment the first-use and JIT paths took 2.19 GiB after start (3.24 GiB free, then
# 1.00-1.10); activation peak + workspaces leave 620 MiB of it to module loads and local
# memory, which do not scale with the scratch (the 25% share alone fell 0.35 GiB short).
JIT_HEADROOM_FLOOR_B12X = 620 * MiB


def is_cpu(gpu: GpuKind) -> bool:
    return gpu.arch == "cpu"


def cuda_context(p: Profile, gpu: GpuKind) -> tuple[int, str]:
    if is_cpu(gpu):
        return 0, "no device context on the CPU backend"
    total, parts = CONTEXT_BYTES, ["context+cuBLAS 740 MiB"]
    if p.parallel.tensor > 1:
        total += NCCL_TP_BYTES
        parts.append("NCCL TP 840 MiB")
    for name, size in (("DCP", p.parallel.decode_context), ("PP", p.parallel.pipeline)):
        if size > 1:
            total += NCCL_GROUP_BYTES
            parts.append(f"NCCL {name} 384 MiB")
    parts[-1] += " (H200-measured figures; field idle check: docs/benchmarks.md)"
    return total, " + ".join(parts)


FIELD_FIRST_PREFILL = {"glm_moe_dsa": 2088 * MiB}
"""What a first 64K prefill took above idle in the field, by model type (GLM-5.2 3.42 bpw,
TP4/DCP4, docs/benchmarks.md "Dry run vs the field"): a plan whose estimated reserve for it
is smaller says so and names qualify, which measures the worst case before serving."""


# The first forward's allocations above its intermediates: Llama's profile-run peak on the
# H200 (vLLM 0.26, T=2048) was 152 MiB against 60 MiB of intermediates. Not derived from
# vLLM's source (cuBLAS workspaces and torch.compile's first run are candidates); the
# DeepSeek-V2 (+14 MiB) and GLM-5 (+13 MiB) peaks agree with it.
FIRST_FORWARD_BYTES = 92 * MiB
# What vLLM 0.26's sparse indexer allocates as its profile stand-in
# (VLLM_SPARSE_INDEXER_MAX_LOGITS_MB, 512 by default).
INDEXER_LOGITS_MB = 512
H200_CHECK = "H200 vLLM 0.26 profile peaks: Llama 152, DeepSeek-V2 602, GLM-5 2,139 MiB"


def mla_prefill_context(p: Profile, f: ModelFacts, block_size: int) -> int:
    """vLLM's stand-in, in an MLA layer run without attention metadata, for up-projecting
    one chunk of prefill context: kv_b_proj's output over the chunked-prefill workspace
    (8 x max_model_len tokens, at least 4 pages per sequence, at most 64K tokens)."""
    if not f.is_mla:
        return 0
    s = p.serving
    tokens = min(max(8 * s.max_model_len, 4 * s.max_num_seqs * block_size), 64 * 1024)
    tokens = max(tokens, s.max_num_seqs * block_size)
    heads = max(1, f.heads // p.parallel.tensor)
    return tokens * heads * (f.qk_nope + f.v_head) * f.dtype_bytes


def indexer_logits(p: Profile, f: ModelFacts) -> int:
    """The sparse indexer's stand-in for its largest logits tile (a fixed size)."""
    if not f.has_indexer:
        return 0
    return int(p.env.get("VLLM_SPARSE_INDEXER_MAX_LOGITS_MB", INDEXER_LOGITS_MB)) * MiB


def legacy_activation_peak(d: Deployment, f: ModelFacts) -> tuple[int, str]:
    """The earlier estimate, kept for runtimes whose stand-ins no run has measured (the
    b12x fork lines): layer intermediates and the sampler, no stand-ins."""
    p = d.profile
    t = p.serving.max_num_batched_tokens
    tp = p.parallel.tensor
    b = 2
    hidden = 4 * t * f.hidden * b  # hidden, residual, normed input, attention output
    heads = max(1, f.heads // tp)
    if f.is_mla:
        attn = t * heads * ((f.qk_nope + f.qk_rope) + (f.qk_nope + f.v_head) + f.v_head) * b
    else:
        attn = t * (heads + 2 * max(1, f.kv_heads // tp)) * f.head_dim * b * 2
    if f.is_moe:
        inter = f.moe_intermediate // tp
        mlp = t * f.experts_per_token * (3 * inter + f.hidden) * b
    else:
        mlp = t * 3 * (f.intermediate // tp) * b
    rows = d.draft_rows
    sampler = 2 * rows * f.vocab * 4  # fp32 logits and probabilities
    total = hidden + max(attn, mlp) + sampler
    detail = (
        f"T={t}: 4*T*hidden*2 + max(attention, MoE/MLP intermediates) + "
        f"sampler 2*{rows} rows*vocab*4; checked against the field's 64K prefill "
        "(2,088 MiB above idle): under, see docs/benchmarks.md"
    )
    return total, detail


def activation_peak(d: Deployment, f: ModelFacts, gpu: GpuKind) -> tuple[int, str]:
    """Peak of vLLM's profile run above the weights, at max_num_batched_tokens: the residual
    stream, the largest transient (a layer's intermediates or one of vLLM's profile
    stand-ins, which run one after another and so do not add), and the first forward's
    fixed allocations. The stand-ins are upstream vLLM's (``profile_stand_ins``, checked on
    0.26); on a fork the earlier estimate stands until a run there measures it."""
    if not d.runtime.profile_stand_ins:
        return legacy_activation_peak(d, f)
    p, block_size = d.profile, d.block_size
    t = p.serving.max_num_batched_tokens
    tp = p.parallel.tensor
    b = f.dtype_bytes
    stream = 3 * t * f.hidden * b  # hidden, residual, normed input
    if f.is_moe:
        inter = max(f.moe_intermediate * f.experts_per_token, f.intermediate) // tp
    else:
        inter = f.intermediate // tp
    mlp = t * 3 * inter * b  # gate/up output and the activation's
    mla = mla_prefill_context(p, f, block_size)
    index = indexer_logits(p, f)
    fixed = 0 if is_cpu(gpu) else FIRST_FORWARD_BYTES
    total = stream + max(mlp, mla, index) + fixed
    detail = (
        f"T={t}: residual stream 3*T*hidden*2 + max(MLP {mlp / MiB:,.0f} MiB, MLA prefill "
        f"stand-in {mla / MiB:,.0f} MiB, indexer logits stand-in {index / MiB:,.0f} MiB) "
        f"+ {fixed // MiB} MiB first-forward allocations (not derived from "
        f"vLLM's source; the Llama peak less its intermediates); checked against {H200_CHECK}"
    )
    return total, detail


def _align(n: int, to: int = 1024) -> int:
    return -(-n // to) * to


def sparse_mla_scratch(rows: int, heads: int, v_dim: int, chunks: int, decode: bool) -> int:
    """b12x 1.5.1's sparse-MLA scratch layout (every term aligned to 1 KiB)."""
    if decode:
        return (
            _align(rows * chunks * heads * v_dim * 2)
            + _align(rows * chunks * heads * 4)
            + _align(rows * heads * 4)
            + 3 * _align(4)
        )
    return _align(rows * heads * v_dim * 2) + _align(rows * heads * 4) + _align(4)


def workspace_parts(d: Deployment, f: ModelFacts, gpu: GpuKind) -> list[tuple[str, int, str, bool]]:
    """Kernel scratch and persistent buffers by formula; ``b12x_sizing`` replaces them.

    Returns ``(name, bytes, detail, shared)``: ``shared`` parts are b12x scratch, which
    sequential ops reuse (b12x's ``MemoryRequirements.sequential`` takes their maximum).
    """
    if is_cpu(gpu):
        return []
    p = d.profile
    parts: list[tuple[str, int, str, bool]] = []
    dcp = p.parallel.decode_context
    # Under DCP every rank attends with all heads of its DCP group over its KV shard.
    heads = max(1, f.heads // p.parallel.tensor) * dcp
    rows = d.draft_rows
    t = p.serving.max_num_batched_tokens
    if f.is_mla and d.b12x_sparse_mla:
        chunks = -(-(f.index_topk or 2048) // 64)
        extend = sparse_mla_scratch(t, heads, f.kv_lora_rank, chunks, decode=False)
        decode = sparse_mla_scratch(rows, heads, f.kv_lora_rank, chunks, decode=True)
        parts.append(
            (
                "b12x_sparse_mla",
                max(extend, decode),
                f"b12x scratch formula: max(extend T={t}, decode {rows} rows x {chunks} chunks) "
                f"x {heads} heads",
                True,
            )
        )
    if f.has_indexer:
        local = -(-p.serving.max_model_len // dcp)  # tokens of context on this rank
        pages, tile = -(-local // 64), min(32768, local)
        size = t * tile * 4 + t * f.index_topk * 8 + pages * 64 * KiB
        parts.append(
            (
                "dsa_indexer",
                size,
                f"prefill T={t}: fp32 logits over a {tile}-token supertile + top-{f.index_topk} "
                f"indices/scores + {pages} pages x 64 KiB",
                True,
            )
        )
    if f.is_moe and p.model.quantization == "exl3":
        inter = f.moe_intermediate // p.parallel.tensor
        parts.append(
            (
                "b12x_fused_moe",
                t * f.experts_per_token * (f.hidden * 6 + inter * 16),
                f"T={t} x top-{f.experts_per_token} x (hidden*6 + inter*16): fitted to b12x "
                "1.5.1 EXL3 w4a16 scratch",
                True,
            )
        )
    if dcp > 1:
        staging = rows * heads * ((f.kv_lora_rank + f.qk_rope) * 2 + f.kv_lora_rank * 2 + 4)
        parts.append(
            (
                "dcp_buffers",
                staging,
                f"{rows} rows x {heads} heads: gathered q, partial out and LSE",
                False,
            )
        )
    return parts


def drafter_stand_ins(p: Profile, f: ModelFacts, block_size: int, stand_ins: bool) -> int:
    """What vLLM 0.26's MTP drafter leaves cached in torch's pool: its dummy runs (capture
    warmups, kernel warmup) carry no attention metadata, so its MLA layer and indexer take
    their profile stand-ins each time; the indexer's is freed before the MLA layer's is
    requested, so the allocator keeps both, in separate segments."""
    if not stand_ins or not p.mtp_tokens or not f.mtp_layers:
        return 0
    index = indexer_logits(p, f) if f.mtp_has_indexer else 0
    return mla_prefill_context(p, f, block_size) + index


def cudagraph_pool(
    p: Profile,
    f: ModelFacts,
    gpu: GpuKind,
    captures: tuple[int, ...],
    block_size: int = 16,
    stand_ins: bool = True,
) -> tuple[int, str]:
    """Memory CUDA-graph capture takes: the pool's first segment, the largest graph's
    intermediates, per captured graph and layer the graph's own device memory (kernel
    nodes and their pieces' outputs; fitted to the one published capture: 0.74 GiB per
    rank for GLM-5.2 3.42 bpw, 79 layers with the draft, FULL_AND_PIECEWISE, graphs up to
    48 tokens, FIELD-NOTES; docs/benchmarks.md), and on upstream vLLM the MTP drafter's
    stand-ins (that field capture, on the b12x fork, leaves no room for them)."""
    sizes = [] if is_cpu(gpu) else captures
    if not sizes:
        return 0, "no CUDA graphs"
    top = max(sizes)
    per = top * f.hidden * 2 * 8  # the pool holds the largest graph's intermediates
    kinds = 2 if p.serving.cudagraph_mode == "FULL_AND_PIECEWISE" else 1
    layers = f.num_layers + (f.mtp_layers if p.mtp_tokens else 0)
    graphs = len(sizes) * kinds
    drafter = drafter_stand_ins(p, f, block_size, stand_ins)
    total = 128 * MiB + per + graphs * layers * GRAPH_LAYER_BYTES + drafter
    detail = (
        f"128 MiB + largest graph ({top} tokens) + {graphs} graphs x {layers} layers x "
        f"{GRAPH_LAYER_BYTES // KiB} KiB (fitted to the field's 0.74 GiB capture)"
    )
    if drafter:
        detail += (
            f" + the MTP drafter's profile stand-ins left cached ({drafter / MiB:,.0f} MiB, "
            "vLLM 0.26's dummy drafter runs; checked against the H200's GLM-5 capture: "
            "vLLM estimated 2.55 GiB, 2.59 GiB actual)"
        )
    return total, detail


def jit_headroom_unmeasured(d: Deployment, gpu: GpuKind, workspaces: int) -> tuple[int, str]:
    if is_cpu(gpu):
        return 0, "no device JIT on the CPU backend"
    b12x = d.b12x_sparse_mla
    floor = JIT_HEADROOM_FLOOR_B12X if b12x else JIT_HEADROOM_FLOOR
    size = max(floor, int(JIT_HEADROOM_FRACTION * workspaces))
    how = f"unmeasured: max({floor // MiB} MiB, 25% of workspaces) until a run measures the prewarm"
    if b12x:
        how += "; floor fitted to the field's 2.19 GiB first-use drop"
    return size, how
