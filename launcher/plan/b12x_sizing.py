"""Workspaces sized by b12x's own plan functions (``--b12x-sizing``).

The shapes b12x is asked for (``specs``) are plain Python and shared with the b12x
prewarm provider, which lists them without importing torch or b12x. Turning a shape
into a b12x plan (``mla_plan``, ``indexer_plan``, ``moe_scratch_plan``) imports b12x
and torch lazily. b12x plans are metadata only: they size memory on a machine without
a GPU, but some routes depend on the SM count of the device they are planned for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from launcher.deployment import Deployment
from launcher.errors import EnvironmentProblem, LauncherError
from launcher.plan import estimates
from launcher.plan.planner import Component

if TYPE_CHECKING:
    from launcher.plan.model import ModelFacts
    from launcher.profile.schema import Profile

INSTALL_HINT = (
    "--b12x-sizing needs b12x and torch: pip install '.[serve]' in the b12x-launch checkout "
    "(or pip install b12x torch triton), or drop --b12x-sizing to use the formulas"
)
CPU_NOTE = "cpu device: SM-count-dependent routes may undercount"
INDEX_PAGE = 64
"""b12x's FP8 DSA indexer pages are 64 tokens."""
MLA_CHUNK = 64
"""Sparse-MLA decode candidates per split chunk (b12x's ``bi``)."""
TRELLIS_CODEBOOKS = ("mcg", "lut_e4m3", "lut_fp16")
CKV_GATHER_ENV = "VLLM_B12X_MLA_CKV_GATHER"


@dataclass(frozen=True)
class MlaSpec:
    """One ``attention.sparse_mla`` plan."""

    mode: str
    rows: int
    heads: int
    head_dim: int
    v_head_dim: int
    width: int
    chunks: int
    page_size: int
    kv_cache_dtype: str
    fp8_rope: bool
    return_lse: bool
    softmax_scale: float
    lse_scale: str = "base2"
    """The LSE base the runtime's backend asks for (``natural`` on the fork lines)."""


@dataclass(frozen=True)
class IndexerSpec:
    """One ``attention.dsa_indexer`` FP8 plan."""

    mode: str
    rows: int
    heads: int
    head_dim: int
    pages: int
    topk: int


@dataclass(frozen=True)
class MoeSpec:
    """``moe.fused_moe`` EXL3 (w4a16) routed experts at each planned token count."""

    tokens: tuple[int, ...]
    experts: int
    top_k: int
    hidden: int
    intermediate: int
    bits: int
    codebook: str


@dataclass(frozen=True)
class Specs:
    mla_decode: tuple[MlaSpec, ...] = ()
    mla_extend: MlaSpec | None = None
    mla_ckv_extend: MlaSpec | None = None
    """The full-CKV gather's extend plan over this rank's own heads (Gilded Gnosis)."""
    indexer_decode: tuple[IndexerSpec, ...] = ()
    indexer_prefill: IndexerSpec | None = None
    moe: MoeSpec | None = None


def uses_b12x_attention(d: Deployment, f: ModelFacts) -> bool:
    """The fork's B12X sparse-MLA backend serves attention (either fork line)."""
    return f.is_mla and d.b12x_sparse_mla


def ckv_gather(d: Deployment) -> bool:
    """Whether DCP prefill gathers the full compressed KV (a line that does, ``gathers_ckv``:
    Gilded Gnosis, with ``VLLM_B12X_MLA_CKV_GATHER=1`` and DCP > 1). It adds an extend plan
    over the rank's own heads and the DCP top-k remap kernels."""
    p = d.profile
    return (
        d.runtime.gathers_ckv and p.parallel.decode_context > 1 and p.env.get(CKV_GATHER_ENV) == "1"
    )


def uses_b12x_moe(p: Profile, f: ModelFacts) -> bool:
    return f.is_moe and p.model.quantization == "exl3"


def specs(d: Deployment, f: ModelFacts) -> Specs:
    """The b12x plans the deployment implies; pure Python (no torch, no b12x)."""
    p = d.profile
    if p.hardware.gpu == "cpu":
        return Specs()
    tp, dcp = p.parallel.tensor, p.parallel.decode_context
    rows = d.draft_rows
    t = p.serving.max_num_batched_tokens
    out = Specs()
    if uses_b12x_attention(d, f):
        runtime = d.runtime
        width = f.index_topk or 2048
        mla = MlaSpec(
            mode="decode",
            rows=1,
            # Under DCP a rank attends its KV shard with every head of its DCP group.
            heads=max(1, f.heads // tp) * dcp,
            head_dim=f.kv_lora_rank + f.qk_rope,
            v_head_dim=f.kv_lora_rank,
            width=width,
            # As b12x's own GLM startup builder: one chunk per 64 selected tokens.
            chunks=math.ceil(width / MLA_CHUNK),
            page_size=d.block_size,
            kv_cache_dtype=p.serving.kv_cache_dtype,
            fp8_rope=d.fp8_rope(f),
            return_lse=dcp > 1,
            softmax_scale=float(f.qk_nope + f.qk_rope) ** -0.5,
            lse_scale=runtime.lse_scale,
        )
        extend = _with(mla, mode="extend", rows=t)
        out = Specs(
            mla_decode=tuple(_with(mla, rows=r) for r in d.decode_rows),
            mla_extend=extend,
            # The gathered cache holds every token: each rank attends with its own heads.
            mla_ckv_extend=_with(extend, heads=max(1, f.heads // tp)) if ckv_gather(d) else None,
        )
        if f.has_indexer:
            idx = IndexerSpec(
                mode="decode",
                rows=1,
                heads=f.index_heads,  # the indexer is replicated, not split by TP
                head_dim=f.index_dim or 128,
                pages=math.ceil(p.serving.max_model_len / (INDEX_PAGE * dcp)),
                topk=f.index_topk,
            )
            out = _with(
                out,
                indexer_decode=tuple(_with(idx, rows=r) for r in d.decode_rows),
                indexer_prefill=_with(idx, mode="prefill", rows=t),
            )
    if uses_b12x_moe(p, f):
        decode = [s for s in d.capture_sizes if s < t] or list(range(1, min(rows, t) + 1))
        experts, inter = f.experts, f.moe_intermediate
        if p.parallel.expert:
            experts = max(1, experts // tp)
        else:
            inter = max(1, inter // tp)
        out = _with(
            out,
            moe=MoeSpec(
                tokens=tuple(sorted({*decode, t})),
                experts=experts,
                top_k=f.experts_per_token,
                hidden=f.hidden,
                intermediate=inter,
                bits=trellis_bits(p, f),
                codebook=trellis_codebook(f),
            ),
        )
    return out


def trellis_bits(p: Profile, f: ModelFacts) -> int:
    """The checkpoint's largest K, else ``model.bits_per_weight`` rounded (3 if unset)."""
    ks = [int(k) for k in _ints((f.exl3 or {}).get("k_values"))]
    if ks:
        return max(ks)
    return round(p.model.bits_per_weight or 3)


def trellis_codebook(f: ModelFacts) -> str:
    book = str((f.exl3 or {}).get("codebook", "mcg"))
    return book if book in TRELLIS_CODEBOOKS else "mcg"


Kernel = Literal["sparse_mla", "dsa_indexer", "fused_moe"]


@dataclass(frozen=True)
class SpecGroup:
    """One group of b12x plans: a workspace part of the plan (``component``), a line of the
    prewarm's list (``listed``) and, when ``prewarmed``, requests of the b12x provider."""

    component: str
    kernel: Kernel
    specs: tuple[Any, ...]
    """``MlaSpec``, ``IndexerSpec`` or (one) ``MoeSpec`` by ``kernel``."""
    replaces: str
    """The formula part (``estimates.workspace_parts``) these plans size instead."""
    listed: str
    detail: str
    """What the plan's part says it is (b12x's call, with the note on the device added)."""
    prewarmed: bool = True


def groups(s: Specs) -> tuple[SpecGroup, ...]:
    """The one enumeration of the b12x plan groups ``s`` holds, in the plan's order: sizing,
    the prewarm's list and the b12x provider's requests all iterate it."""
    out: list[SpecGroup] = []
    if s.mla_decode:
        m = s.mla_decode[-1]
        lse = f" lse {m.lse_scale}" if m.return_lse else ""
        out.append(
            SpecGroup(
                "b12x_sparse_mla_decode",
                "sparse_mla",
                s.mla_decode,
                "b12x_sparse_mla",
                f"sparse_mla decode rows={_rows(s.mla_decode)} heads={m.heads} chunks={m.chunks} "
                f"kv={m.kv_cache_dtype}{' fp8-rope' if m.fp8_rope else ''}{lse}",
                f"sparse_mla.plan(mode=decode, rows {_rows(s.mla_decode)}, heads {m.heads}, "
                f"chunks {m.chunks}, "
                f"kv {m.kv_cache_dtype}{', return_lse' if m.return_lse else ''}) scratch",
            )
        )
    if m := s.mla_extend:
        out.append(
            SpecGroup(
                "b12x_sparse_mla_extend",
                "sparse_mla",
                (m,),
                "b12x_sparse_mla",
                f"sparse_mla extend T={m.rows} heads={m.heads}",
                f"sparse_mla.plan(mode=extend, T={m.rows}, heads {m.heads}) scratch",
            )
        )
    if m := s.mla_ckv_extend:
        out.append(
            SpecGroup(
                "b12x_sparse_mla_ckv_extend",
                "sparse_mla",
                (m,),
                "b12x_sparse_mla",
                f"sparse_mla extend T={m.rows} heads={m.heads} (full-CKV gather, local heads)",
                f"sparse_mla.plan(mode=extend, T={m.rows}, heads {m.heads}: full-CKV gather) "
                "scratch",
                # only a line of another kernel package gathers: its own provider prewarms it
                prewarmed=False,
            )
        )
    if s.indexer_decode:
        i = s.indexer_decode[-1]
        out.append(
            SpecGroup(
                "b12x_dsa_indexer_decode",
                "dsa_indexer",
                s.indexer_decode,
                "dsa_indexer",
                f"dsa_indexer decode rows={_rows(s.indexer_decode)} heads={i.heads} "
                f"pages={i.pages} top-{i.topk}",
                f"dsa_indexer.plan(mode=decode, rows {_rows(s.indexer_decode)}, heads {i.heads}, "
                f"{i.pages} pages, top-{i.topk}) scratch",
            )
        )
    if i := s.indexer_prefill:
        out.append(
            SpecGroup(
                "b12x_dsa_indexer_prefill",
                "dsa_indexer",
                (i,),
                "dsa_indexer",
                f"dsa_indexer prefill T={i.rows} pages={i.pages}",
                f"dsa_indexer.plan(mode=prefill, T={i.rows}, {i.pages} pages) scratch",
            )
        )
    if e := s.moe:
        out.append(
            SpecGroup(
                "b12x_fused_moe",
                "fused_moe",
                (e,),
                "b12x_fused_moe",
                f"fused_moe exl3 T in {{{', '.join(map(str, e.tokens))}}} experts={e.experts} "
                f"inter={e.intermediate} K={e.bits} {e.codebook}",
                f"fused_moe.plan(exl3 w4a16 K={e.bits} {e.codebook}, {e.experts} experts x "
                f"{e.hidden}x{e.intermediate}, top-{e.top_k}, T in {list(e.tokens)}) scratch",
            )
        )
    return tuple(out)


def describe(s: Specs) -> list[str]:
    """Human-readable specializations (what the prewarm provider lists)."""
    return [g.listed for g in groups(s)]


# -------------------------------------------------------------- b12x plans (lazy imports)


def kv_dtype_caps(kv_cache_dtype: str, fp8_rope: bool) -> dict[str, Any]:
    """Sparse-MLA Caps fields for vLLM's ``--kv-cache-dtype``."""
    import torch

    if kv_cache_dtype == "nvfp4_ds_mla":
        return {"kv_dtype": torch.uint8, "scale_format": 2, "fp8_rope": fp8_rope}
    if kv_cache_dtype in ("auto", "bfloat16"):
        return {"kv_dtype": torch.bfloat16}
    if kv_cache_dtype == "fp8_e5m2":
        return {"kv_dtype": torch.float8_e5m2}
    return {"kv_dtype": torch.float8_e4m3fn}


def mla_plan(s: MlaSpec, device: str) -> Any:
    from b12x.attention import sparse_mla

    caps = sparse_mla.Caps(
        device=device,
        num_q_heads=s.heads,
        max_q_rows=s.rows,
        max_width=s.width,
        softmax_scale=s.softmax_scale,
        head_dim=s.head_dim,
        v_head_dim=s.v_head_dim,
        mode=s.mode,
        max_chunks_per_row=s.chunks,
        page_size=s.page_size,
        return_lse=s.return_lse,
        lse_scale=s.lse_scale,
        **kv_dtype_caps(s.kv_cache_dtype, s.fp8_rope),
    )
    return sparse_mla.plan(caps)


def indexer_operands(s: IndexerSpec) -> dict[str, dict[str, Any] | None]:
    """The operand ABI b12x's FP8 indexer declarations need (``invocation_from_descriptors``)."""
    record = s.head_dim + 4 * math.ceil(s.head_dim / 128)  # fp8 keys + one fp32 scale per 128
    shapes = {
        "q_fp8": ((s.rows, s.heads, s.head_dim), "float8_e4m3fn"),
        "query_weights": ((s.rows, s.heads), "float32"),
        "index_k_cache": ((1, INDEX_PAGE * record), "uint8"),
        "page_table": ((s.rows, s.pages), "int32"),
        "cache_lengths": ((s.rows,), "int32"),
        "active_width": ((1,), "int32"),
        "output_indices": ((s.rows, s.topk), "int32"),
    }
    out: dict[str, dict[str, Any] | None] = {
        name: {
            "shape": shape,
            "strides": tuple(math.prod(shape[i + 1 :]) for i in range(len(shape))),
            "dtype": dtype,
            "alignment": 16,
        }
        for name, (shape, dtype) in shapes.items()
    }
    out["output_scores"] = None
    return out


def indexer_plan(s: IndexerSpec, device: str) -> Any:
    from b12x.attention import dsa_indexer

    caps = dsa_indexer.Caps(
        device=device,
        num_q_heads=s.heads,
        max_q_rows=s.rows,
        max_page_table_width=s.pages,
        topk=s.topk,
        mode=s.mode,
    )
    invocation = dsa_indexer.invocation_from_descriptors(caps, operands=indexer_operands(s))
    return dsa_indexer.plan(caps, invocation=invocation)


def moe_weight_plan(s: MoeSpec) -> Any:
    import torch
    from b12x.moe import fused_moe

    return fused_moe.plan_weights(
        quant_modes="w4a16",
        source_format="exl3",
        activation="silu",
        params_dtype=torch.bfloat16,
        num_experts=s.experts,
        hidden_size=s.hidden,
        intermediate_size=s.intermediate,
        trellis_bits=s.bits,
        trellis_codebook=s.codebook,
    )


def moe_scratch_plan(s: MoeSpec, tokens: int, device: str, weight_plan: Any) -> Any:
    """b12x's weight-free heuristic plan (``fused_moe.plan(Caps)``); sizes scratch only."""
    from b12x.moe import fused_moe

    caps = fused_moe.Caps(
        max_tokens=tokens,
        num_topk=s.top_k,
        device=device,
        weight_plan=weight_plan,
        quant_mode="w4a16",
    )
    return fused_moe.plan(caps, prewarm_launches=False)


def sizing_device(profile_gpu: str) -> tuple[str, str]:
    """The device b12x plans for, and a note on it: a local SM12x GPU, else the CPU."""
    import torch

    from launcher.plan.catalog import gpu_for_device_name

    if torch.cuda.is_available():
        index = torch.cuda.current_device()
        major, minor = torch.cuda.get_device_capability(index)
        name = torch.cuda.get_device_name(index)
        if major == 12:
            other = gpu_for_device_name(name) != profile_gpu
            return f"cuda:{index}", f"sized on cuda:{index} ({name})" + (
                f", not the profile's {profile_gpu}: SM-count-dependent routes may differ"
                if other
                else ""
            )
        return "cpu", f"{CPU_NOTE} (cuda:{index} is sm_{major}{minor}, not a b12x target)"
    return "cpu", CPU_NOTE


# ---------------------------------------------------------------------------- sizing


def size_workspaces(d: Deployment, facts: ModelFacts) -> tuple[Component, ...]:
    """Workspace parts from b12x's own plans, plus the formula parts b12x does not serve.

    Scratch parts are ``shared`` (b12x's sequential ops reuse one scratch: the planner
    takes their maximum); persistent memory is not.

    Raises:
        EnvironmentProblem: b12x or torch cannot be imported.
        LauncherError: b12x refuses a shape the profile implies.
    """
    try:
        import b12x  # noqa: F401
        import torch  # noqa: F401
    except Exception as exc:
        raise EnvironmentProblem(f"{INSTALL_HINT} ({exc})") from None
    profile = d.profile
    try:
        s = specs(d, facts)
        device, note = sizing_device(profile.hardware.gpu)
        parts = _b12x_parts(s, device, note)
    except ImportError as exc:  # b12x imports, but a module it needs (triton) does not
        raise EnvironmentProblem(f"{INSTALL_HINT} (b12x needs {exc.name or exc})") from None
    except (ValueError, TypeError, NotImplementedError) as exc:
        raise LauncherError(f"b12x refused a plan this profile implies: {exc}") from None
    return (*parts, *_formula_rest(d, facts, s))


def _b12x_parts(s: Specs, device: str, note: str) -> list[Component]:
    parts: list[Component] = []
    persistent: dict[Any, int] = {}

    def add(name: str, plans: list[tuple[int, Any]], what: str) -> None:
        best, at = -1, 0
        for size, plan in plans:
            req = plan.memory_requirements()
            for p in req.persistent:
                need = p.required_nbytes - p.resident_nbytes
                persistent[p.key] = max(persistent.get(p.key, 0), need)
            if req.scratch_nbytes > best:
                best, at = req.scratch_nbytes, size
        parts.append(Component(name, best, "b12x", f"{what}; max at {at}; {note}", shared=True))

    for g in groups(s):
        add(g.component, _plans(g, device), g.detail)
    for key, need in persistent.items():
        parts.append(Component(f"b12x_persistent_{key}", need, "b12x", f"persistent; {note}"))
    return parts


def _plans(g: SpecGroup, device: str) -> list[tuple[int, Any]]:
    """(rows or tokens, b12x plan) for each shape of the group; imports b12x."""
    if g.kernel == "sparse_mla":
        return [(x.rows, mla_plan(x, device)) for x in g.specs]
    if g.kernel == "dsa_indexer":
        return [(x.rows, indexer_plan(x, device)) for x in g.specs]
    (m,) = g.specs
    weights = moe_weight_plan(m)
    return [(t, _Scratch(moe_scratch_plan(m, t, device, weights))) for t in m.tokens]


class _Scratch:
    """A fused-MoE scratch plan seen through ``memory_requirements()`` like a Plan."""

    def __init__(self, plan: Any):
        self._plan = plan

    def memory_requirements(self) -> Any:
        from b12x.preparation import MemoryRequirements

        return MemoryRequirements(scratch=tuple(self._plan.scratch_specs()))


def _formula_rest(d: Deployment, f: ModelFacts, s: Specs) -> list[Component]:
    """Formula parts for what b12x does not serve here (DCP buffers, a non-b12x indexer)."""
    from launcher.plan.catalog import gpu

    replaced = {g.replaces for g in groups(s)}
    return [
        Component(name, size, "estimate", detail, shared=shared)
        for name, size, detail, shared in estimates.workspace_parts(
            d, f, gpu(d.profile.hardware.gpu)
        )
        if name not in replaced
    ]


def _rows(plans: tuple[Any, ...]) -> str:
    rows = [x.rows for x in plans]
    if rows == list(range(1, len(rows) + 1)):
        return f"1..{rows[-1]}"
    return "{" + ", ".join(map(str, rows)) + "}"


def _with(obj: Any, **changes: Any) -> Any:
    return replace(obj, **changes)


def _ints(value: Any) -> list[int]:
    """Integers found in a config value (a list, a mapping's values, or one number)."""
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, int | float):
        return [int(value)]
    if isinstance(value, list | tuple):
        return [int(v) for v in value if isinstance(v, int | float)]
    return []
