"""The fused-MoE token buckets: each MoE block's own forward, outside the model, at every
token count whose fused-MoE kernel key differs, compiled before sizing.

vLLM picks the fused-MoE tile config per token count (``try_get_optimal_moe_config``), and the
tiles are constexprs, so each config is a kernel of its own; Triton also specializes the
token-count ints on divisibility by 16. No attention and no KV cache is involved, so this runs
on both model runners, including vLLM's V2 runner where the scratch-KV stage cannot.
"""

from __future__ import annotations

import importlib
from typing import Any

from launcher.runtime import phases
from launcher.runtime.prewarm import PrewarmContext, runtime_function
from launcher.runtime.prewarm.accelerators.parallel_compile import compile_only
from launcher.vllm.internals import InternalMissing, Missing, module_path, read_on, resolve


def moe_token_counts(max_tokens: int, captures: list[int], top_k: int) -> list[int]:
    """Token counts that reach every fused-MoE specialization up to ``max_tokens``.

    vLLM picks the fused-MoE launch config by token count in power-of-two-like buckets,
    and Triton specializes integer arguments on divisibility by 16 (tokens x top-k among
    them): each power of two, the count after it, the small counts whose product with
    top-k changes that divisibility, and the CUDA-graph sizes.
    """
    step = 16 // max(1, min(16, top_k)) or 1
    counts = set(range(1, step + 2)) | set(captures) | {max_tokens}
    n = 1
    while n <= max_tokens:
        counts |= {n, n + 1}
        n *= 2
    return sorted(c for c in counts if 1 <= c <= max_tokens)


MOE_CONFIG = module_path("kernel.moe_config")
MOE_KERNELS = MOE_CONFIG.partition(":")[0]
"""Where vLLM's fused-MoE Triton kernels live (``fused_moe_kernel``, ``..._gptq_awq``)."""


def moe_kernels() -> list[Any]:
    """vLLM's fused-MoE ``@triton.jit`` kernels, where this vLLM has them."""
    try:
        module = importlib.import_module(MOE_KERNELS)
    except Exception:  # another layout: the bucket pass launches as serving would
        return []
    return [
        fn
        for name, fn in vars(module).items()
        if name.startswith("fused_moe_kernel") and hasattr(fn, "device_caches")
    ]


WEIGHTS = ("w13_weight", "w2_weight")


def expert_weights(module: Any) -> Any | None:
    """The module holding a fused-MoE layer's expert weights: the layer itself (vLLM's
    ``FusedMoE`` class up to 0.25) or its ``routed_experts`` (0.26 on, where ``FusedMoE`` is a
    factory returning a ``MoERunner``)."""
    for holder in (module, read_on("moe.routed_experts", module)):
        if holder is not None and all(hasattr(holder, w) for w in WEIGHTS):
            return holder
    return None


def moe_blocks(model: Any) -> list[tuple[Any, Any, Any]]:
    """(block, fused-MoE layer, expert weights) once per distinct expert shape: the module
    that owns the layer (gate, shared experts and experts, as the model's forward calls
    them). Modules come parents first, so a runner's own ``routed_experts`` repeats a shape
    already taken with the block above it."""
    if not hasattr(model, "modules"):  # no torch module loaded
        return []
    out, shapes = [], set()
    for parent in model.modules():
        for child in getattr(parent, "children", tuple)():
            holder = expert_weights(child)
            if holder is None:
                continue
            shape = (
                *(tuple(getattr(getattr(holder, w), "shape", ())) for w in WEIGHTS),
                type(read_on("moe.quant_method", holder)).__name__,
            )
            if shape not in shapes:
                shapes.add(shape)
                out.append((parent, child, holder))
    return out


def chooser_args(layer: Any, dtype: Any) -> tuple[str | None, list[int] | None]:
    """The quantisation name and block shape the runtime's experts hand its config chooser
    for this layer (``quant_config.config_name(dtype)`` and ``block_shape``): an fp8-block
    layer has tables of its own; (None, None), the unquantised table, where the layer has no
    quant config. ``InternalMissing`` names a declared internal the live objects lack."""
    quant = _declared("moe.quant_config", layer.quant_method)
    if quant is None:  # vLLM's own None: an unquantised method
        return None, None
    name = _declared("moe.config_name", quant)(dtype)
    return name, _declared("moe.block_shape", quant)


def _declared(name: str, on: Any) -> Any:
    found = resolve(name, on=on)
    if isinstance(found, Missing):  # the check before the weights said its cost
        raise InternalMissing(str(found))
    return found


def moe_config_changes(layer: Any, max_tokens: int, dtype: Any = None) -> list[int]:
    """Token counts on each side of every point where the runtime's own config chooser
    (``try_get_optimal_moe_config``) switches the fused-MoE tile config, asked as the
    runtime asks it for this layer (its quantisation's table, its block shape): the tile
    sizes are constexprs, so each config is a kernel of its own."""
    choose = runtime_function(MOE_CONFIG)
    w13, w2 = read_on("moe.w13_weight", layer), read_on("moe.w2_weight", layer)
    top_k = read_on("moe.top_k", layer)
    if choose is None or w13 is None or w2 is None or not top_k:
        return []
    name, block = chooser_args(layer, dtype)
    out, last = [], None
    for m in range(1, max_tokens + 1):
        chosen = choose(tuple(w13.shape), tuple(w2.shape), top_k, name, m, block_shape=block)
        config = tuple(sorted(chosen.items()))
        if config != last and m > 1:
            out += [m - 1, m]
        last = config
    return out


def find(ctx: PrewarmContext):
    """Each MoE block's own forward, outside the model (no attention, no KV cache), at every
    token count whose fused-MoE kernel key differs: both model runners, before sizing."""
    if not ctx.facts.is_moe:
        return "skipped: the model has no MoE layers"
    # A warm boot from a cache artifact runs every count too, though its Triton keys are
    # replayed: skipped, Dynamo met vLLM's torch.compile'd routing helpers first at another
    # size and compiled a graph the artifact lacked; run at 1 and 2 alone, the CUDA context
    # measured 0.48 GiB above the baked boot's and sizing came out short (docs/changelog.md,
    # 2026-12-04).
    model = read_on("runner.model", ctx.model_runner)
    blocks = moe_blocks(model)
    if not blocks:
        return f"missing: no fused-MoE expert weights ({', '.join(WEIGHTS)}) in the loaded model"
    config = ctx.worker.vllm_config
    max_tokens = int(config.scheduler_config.max_num_batched_tokens)
    captures = list(ctx.deployment.capture_sizes)
    counts = set(moe_token_counts(max_tokens, captures, ctx.facts.experts_per_token))
    unasked = ""
    for _, _, weights in blocks:
        try:
            counts |= set(moe_config_changes(weights, max_tokens, config.model_config.dtype))
        except InternalMissing as exc:  # the counts above still run; the gap is named
            unasked = f"; tile-config changes not asked: {exc}"
    counts = sorted(c for c in counts if 1 <= c <= max_tokens)

    def run() -> None:
        import torch
        from vllm.forward_context import set_forward_context

        dtype = config.model_config.dtype
        # Compile-only launches of the fused-MoE kernels, in threads: 28 keys took 23 s one by
        # one on the H200 (GLM tier), and 8.8 s waited for in threads (2026-12-03). Nobody waits
        # here: the compiles go on beside the next passes (the first wave's torch.compile), a
        # wave's launch of a key still compiling waits for that key, and the runtime provider
        # settles the rest after its waves.
        with compile_only(moe_kernels(), later=ctx.compiling):
            for block, layer, weights in blocks:
                device = weights.w13_weight.device
                hidden = int(read_on("moe.hidden_size", weights, 0) or weights.w2_weight.shape[1])
                experts = int(
                    read_on("moe.global_num_experts", weights, 0) or weights.w13_weight.shape[0]
                )
                for i, n in enumerate(counts):
                    phases.part("MoE buckets", i, len(counts))
                    x = torch.randn(n, hidden, dtype=dtype, device=device) * 0.01
                    with set_forward_context(None, config, num_tokens=n):
                        try:
                            block(x)
                        except TypeError:  # a block whose forward wants more: the layer
                            layer(x, torch.randn(n, experts, device=device).to(dtype))
                if device.type == "cuda":
                    torch.cuda.synchronize(device)

    names = sorted({type(b).__name__ for b, _, _ in blocks})
    return [(f"{'/'.join(names)}.forward(n tokens) for n in {counts}{unasked}", run)]
