"""Prewarm through the runtime: the loaded vLLM's own warmups, run before sizing.

vLLM (and each fork line) warms its kernels in ``compile_or_warm_up_model``, after the KV
cache is sized; whatever compiles there, or on the first request, takes memory the KV
cache was promised. This provider drives the runtime's own entry points from the planned
worker's ``determine_available_memory``, inside the live vLLM config, with the runtime's
own values (``vllm_config``, the runner's DCP rank), never re-created kernel calls.

Most of them only do something once a KV cache exists (attention groups, metadata
builders, the indexer's caches), so they run on a scratch KV cache built and released
through vLLM's own profiling path (``scratch_kv``): first the runtime's warmups against the
pristine runner, then serving-shaped batches through vLLM's scheduler, then the dummy
batches of vLLM's graph capture (``serving_batches``). Where the runner cannot build one
(vLLM's V2 model runner), those entry points say so and the late-JIT census covers them.
The entry points:

- the fork's ``sparse_mla_triton_warmup_if_needed(worker)`` (prefill-chunk metadata and
  the other sparse-MLA Triton helpers, with the runtime's DCP size, interleave and rank);
- ``b12x_warmup(worker, capture sizes)`` and the fork's b12x weight preparation;
- every attention layer's own prewarm methods (the backend's extend prewarm, which covers
  the full-CKV local-head plan when CKV gather is on);
- vLLM's JIT-warmup registry;
- each MoE block's own forward, outside the model, at each token count whose fused-MoE
  kernel differs (``moe_buckets``): no attention and no KV cache, so it runs on both model
  runners.

Each entry point is found by capability (a module that has the function, an object that
has the method), never by version. Each one is reported with what it did: ``called`` with
the Triton kernels it brought in (compiled or loaded, counted by ``jit_watch.loaded``,
which installs no hook), ``no-op`` when it brought in none (a runtime warmup that swallows
its own failure lands here, not in ``called``), ``skipped``, ``missing`` or ``failed``.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from launcher.runtime.prewarm import (
    PrewarmContext,
    PrewarmResult,
    run_after_forward,
    runtime_function,
)
from launcher.runtime.prewarm.accelerators import inductor_pool
from launcher.runtime.prewarm.diagnostics import thread_samples
from launcher.runtime.prewarm.flow import NONE, Fact, ServedKernels
from launcher.runtime.prewarm.model import compiled_helpers, moe_buckets
from launcher.vllm.internals import Missing, group_paths, module_of, module_path, read_on, resolve

Thunk = Callable[[], Any]


@dataclass(frozen=True)
class EntryPoint:
    name: str
    describe: Callable[[PrewarmContext], str]
    find: Callable[[PrewarmContext], list[tuple[str, Thunk]] | str]
    """The calls to make (label, thunk), or why there is nothing to call ("missing: ...")."""
    needs_kv: bool = False
    """Runs only on the scratch KV cache (attention groups, metadata builders)."""
    serving: bool = False
    """Launches what serving launches (its own batches, not a runtime warmup's shapes): the
    kernels it runs are the key enumeration's templates."""


def dcp_params(runner: Any) -> tuple[int, int, int]:
    """(DCP size, interleave, DCP rank) as the runtime holds them."""
    parallel = runner.vllm_config.parallel_config
    size = int(parallel.decode_context_parallel_size)
    interleave = resolve("config.interleave", on=parallel)  # declared fallbacks: 1, the group
    interleave = 1 if isinstance(interleave, Missing) else int(interleave or 1)
    rank = resolve("dcp.rank", on=runner)
    if (isinstance(rank, Missing) or rank is None) and size > 1:
        rank = resolve("dcp.group")().rank_in_group
    return size, interleave, int(rank or 0)


# ------------------------------------------------------------------ the entry points


def _sparse_mla_triton(ctx: PrewarmContext):
    fn = runtime_function(module_path("warmup.sparse_mla_triton"))
    if fn is None:
        return f"missing: {module_of('warmup.sparse_mla_triton')}"
    return [("sparse_mla_triton_warmup_if_needed(worker)", lambda: fn(ctx.worker))]


def _b12x_warmup(ctx: PrewarmContext):
    fn = runtime_function(module_path("warmup.b12x"))
    if fn is None:
        return f"missing: {module_of('warmup.b12x')}"
    sizes = list(ctx.worker.vllm_config.compilation_config.cudagraph_capture_sizes or [])
    return [(f"b12x_warmup(worker, {sizes})", lambda: fn(ctx.worker, sizes))]


B12X_STARTUP = tuple(p.partition(":")[0] for p in group_paths("b12x_prepare"))
"""Where the b12x-package line keeps ``begin_b12x_preparation``."""


def _drive(handle: Any) -> None:
    """Run a preparation to its end, whatever the line hands back: a handle to wait on or
    to take a result from, an iterator of steps, or nothing (it ran in the call)."""
    for name in ("wait", "result", "join"):
        if callable(getattr(handle, name, None)):
            getattr(handle, name)()
            return
    if hasattr(handle, "__next__") or (hasattr(handle, "__iter__") and not isinstance(handle, str)):
        for _ in handle:
            pass


def _b12x_prepare(ctx: PrewarmContext):
    """The b12x-package line's ``weights`` preparation stage (before memory profiling),
    through its own ``begin_b12x_preparation(worker, stage="weights")``, driven to its end."""
    for module in B12X_STARTUP:
        fn = runtime_function(f"{module}:begin_b12x_preparation")
        if fn is not None:
            label = f"{module}.begin_b12x_preparation(worker, stage='weights')"
            return [(label, lambda fn=fn: _drive(fn(ctx.worker, stage="weights")))]
    return "missing: begin_b12x_preparation (the b12x-package line's preparation stages)"


PREWARM_METHOD_WORDS = ("prewarm", "warmup")
NOT_A_PREWARM = ("sync",)
"""``_sync_warmup`` is a device sync and a DCP barrier, not a prewarm."""
ARGUMENTS = {
    "max_batched": "max_num_batched_tokens",
    "max_batched_tokens": "max_num_batched_tokens",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "max_tokens": "max_num_batched_tokens",
    "num_tokens": "max_num_batched_tokens",
    "max_num_seqs": "max_num_seqs",
    "batch_size": "max_num_seqs",
    "max_num_reqs": "max_num_seqs",
}
"""A prewarm method's parameter -> the serving value the runtime itself passes it (the fork's
``_prewarm_extend_kernels_once(max_batched)`` takes the scheduler's token budget)."""


def _impl_methods(impl: Any, serving: dict[str, int]) -> list[tuple[str, dict[str, int]] | str]:
    """An attention implementation's prewarm methods, each with the arguments the runtime
    would pass; a string for one whose arguments cannot be filled (reported, not called)."""
    out: list[tuple[str, dict[str, int]] | str] = []
    for name in dir(type(impl)):
        lowered = name.lower()
        if not any(w in lowered for w in PREWARM_METHOD_WORDS):
            continue
        if any(w in lowered for w in NOT_A_PREWARM):
            continue
        method = getattr(impl, name, None)
        if not callable(method):
            continue
        try:
            params = inspect.signature(method).parameters.values()
        except (TypeError, ValueError):
            continue
        kwargs, unknown = {}, []
        for p in params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or p.default is not p.empty:
                continue
            if p.name in ARGUMENTS:
                kwargs[p.name] = serving[ARGUMENTS[p.name]]
            else:
                unknown.append(p.name)
        out.append(
            f"{name}({', '.join(unknown)}): arguments unknown" if unknown else (name, kwargs)
        )
    return out


def attention_impls(model: Any) -> list[Any]:
    """Every attention layer's backend implementation in the loaded model (one per layer)."""
    out, seen = [], set()
    for module in getattr(model, "modules", lambda: [])():
        impl = read_on("attention.impl", module)
        if impl is not None and id(impl) not in seen:
            seen.add(id(impl))
            out.append(impl)
    return out


def _attention_plans(ctx: PrewarmContext):
    model = read_on("runner.model", ctx.model_runner)
    impls = attention_impls(model)
    if not impls:
        return "missing: no attention implementations on the loaded model"
    scheduler = ctx.worker.vllm_config.scheduler_config
    serving = {
        "max_num_batched_tokens": int(scheduler.max_num_batched_tokens),
        "max_num_seqs": int(scheduler.max_num_seqs),
    }
    calls: list[tuple[str, Thunk]] = []
    unfilled: set[str] = set()
    for i, impl in enumerate(impls):
        for found in _impl_methods(impl, serving):
            if isinstance(found, str):
                unfilled.add(f"{type(impl).__name__}.{found}")
                continue
            name, kwargs = found
            ckv = read_on("warmup.ckv_extend_plan", impl)
            note = " (+ full-CKV local-head plan)" if ckv is not None else ""
            shown = ", ".join(f"{k}={v}" for k, v in kwargs.items())
            method = getattr(impl, name)
            calls.append(
                (
                    f"layer {i} {type(impl).__name__}.{name}({shown}){note}",
                    lambda m=method, kw=kwargs: m(**kw),
                )
            )
    if not calls:
        names = sorted({type(i).__name__ for i in impls})
        why = f"; {', '.join(sorted(unfilled))}" if unfilled else ""
        return f"missing: {', '.join(names)} offer no prewarm method{why}"
    return calls


def _jit_registry(ctx: PrewarmContext):
    kernel_config = read_on("config.kernel_config", ctx.worker.vllm_config)
    registry = read_on("warmup.runner_jit_registry", ctx.model_runner)
    if registry is None:
        return "missing: model_runner.jit_warmup_registry"
    if not read_on("config.enable_jit_warmup", kernel_config, False):
        return "missing: kernel_config.enable_jit_warmup is off"
    return [("jit_warmup_registry.warmup()", registry.warmup)]


def _block_table(ctx: PrewarmContext):
    fn = runtime_function(module_path("warmup.block_table"))
    if fn is None:
        return f"missing: {module_of('warmup.block_table')}"
    runner = ctx.model_runner
    tokens = int(ctx.worker.vllm_config.scheduler_config.max_num_batched_tokens)
    return [(f"warm_v1_block_table_kernels(device, {tokens})", lambda: fn(runner.device, tokens))]


def _deep_gemm(ctx: PrewarmContext):
    fn = runtime_function(module_path("warmup.deep_gemm"))
    if fn is None:
        return f"missing: {module_of('warmup.deep_gemm')}"
    envs = importlib.import_module(module_of("warmup.envs"))
    supported = runtime_function(module_path("warmup.deep_gemm_supported"))
    if not (envs.VLLM_USE_DEEP_GEMM and supported and supported()):
        return "skipped: DeepGEMM is off or unsupported here (vLLM's kernel_warmup skips it too)"
    if envs.VLLM_DEEP_GEMM_WARMUP == "skip":
        return "skipped: VLLM_DEEP_GEMM_WARMUP=skip"
    tokens = int(ctx.worker.vllm_config.scheduler_config.max_num_batched_tokens)
    model = ctx.worker.get_model()
    return [(f"deep_gemm_warmup(model, {tokens})", lambda: fn(model, tokens))]


def _shape(ctx: PrewarmContext) -> Any:
    """The live vLLM config's numbers, with what the profile's API refuses (prompt logprobs
    under ``serving.prompt_logprobs: refuse``: no wave serves them)."""
    from launcher.runtime.prewarm.stage import serving_batches as sb

    mode = ctx.profile.serving.prompt_logprobs
    return replace(sb.shape_of(ctx.worker), prompt_logprobs=mode)


def _serving(ctx: PrewarmContext):
    from launcher.runtime.prewarm.stage import serving_batches as sb

    shape = _shape(ctx)
    # A warm boot from a cache artifact replays the baked boot's keys (the ``keys`` provider):
    # only the request features' waves still run (vLLM's torch.compile'd sampler helpers).
    early = getattr(ctx, "early", None)
    plan = sb.feature_waves(shape) if ctx.replay else sb.waves(shape)
    config = ctx.scratch.kv_cache_config

    def run() -> None:
        from launcher.runtime.prewarm.accelerators import sampler_ahead
        from launcher.runtime.prewarm.stage.scratch_kv import transient_peak

        log = ctx.log or (lambda _: None)
        after = early.submit if early is not None else None
        ahead = sampler_ahead.for_stage(
            shape,
            ctx.device,
            bool(ctx.replay),
            log,
            ctx.profile.model.dtype,
            wanted=ctx.profile.prewarm.sampler_ahead,
        )
        try:
            with transient_peak(read_on("runner.device", ctx.model_runner)) as peak:
                ctx.scratch.account = sb.serve(ctx.worker, config, plan, log, after_wave=after)
        finally:
            if ahead is not None:  # its thread and wrapper end with the waves
                log(ahead.join())
        ctx.scratch.serving_peak = max(peak.peak, peak.segments)

    return [(f"vLLM's scheduler and execute_model: {len(plan)} waves", run)]


def _capture(ctx: PrewarmContext):
    from launcher.runtime.prewarm.stage import serving_batches as sb

    if not hasattr(ctx.model_runner, "_dummy_run"):
        return "missing: model_runner._dummy_run"
    return [
        ("model_runner._dummy_run: capture shapes, eager", lambda: sb.capture_shapes(ctx.worker))
    ]


def _sampler_warmup(ctx: PrewarmContext):
    from launcher.runtime.prewarm.stage import serving_batches as sb

    runner = ctx.model_runner
    run = resolve("scratch.dummy_sampler_run", on=runner)
    if isinstance(run, Missing):
        return f"missing: {run}"
    if int(ctx.worker.vllm_config.parallel_config.pipeline_parallel_size) > 1:
        return "skipped: only the last pipeline stage samples (vLLM's own warmup asks which)"
    return [
        (
            "model_runner._dummy_sampler_run: vLLM's sampler warmup",
            lambda: sb.sampler_warmup(ctx.worker, run),
        )
    ]


ENTRY_POINTS: dict[str, EntryPoint] = {
    e.name: e
    for e in (
        EntryPoint(
            "block_table_warmup",
            lambda c: "vLLM's slot-mapping kernel warmup (v1 block table)",
            _block_table,
            needs_kv=True,
        ),
        EntryPoint(
            "sparse_mla_triton_warmup",
            lambda c: (
                "the runtime's sparse-MLA Triton warmup (prefill-chunk metadata, DCP "
                "helpers) with the runtime's DCP size, interleave and rank"
            ),
            _sparse_mla_triton,
            needs_kv=True,
        ),
        EntryPoint(
            "deep_gemm_warmup",
            lambda c: "vLLM's DeepGEMM warmup up to max_num_batched_tokens",
            _deep_gemm,
            needs_kv=True,
        ),
        EntryPoint(
            "b12x_warmup",
            lambda c: f"vLLM's b12x_warmup at the capture sizes {list(c.deployment.capture_sizes)}",
            _b12x_warmup,
        ),
        EntryPoint(
            "b12x_prepare",
            lambda c: "the b12x-package line's weight preparation stage",
            _b12x_prepare,
        ),
        EntryPoint(
            "attention_impl_plans",
            lambda c: (
                "each attention layer's own prewarm (extend plan; the full-CKV "
                "local-head plan when CKV gather is on)"
            ),
            _attention_plans,
            needs_kv=True,
        ),
        EntryPoint(
            "jit_warmup_registry",
            lambda c: "vLLM's JIT-warmup registry",
            _jit_registry,
            needs_kv=True,
        ),
        EntryPoint(
            "moe_token_buckets",
            lambda c: (
                "each MoE block's forward (no attention, no KV cache) at every fused-MoE "
                "token bucket and config change up to "
                f"{c.profile.serving.max_num_batched_tokens} tokens"
            ),
            moe_buckets.find,
            serving=True,
        ),
        EntryPoint(
            "compiled_helpers",
            lambda c: (
                "vLLM's torch.compile'd helpers outside the model at each size class "
                "(update_num_computed_tokens_for_batch_change under async speculative decoding)"
            ),
            compiled_helpers.find,
        ),
        EntryPoint(
            "serving_batches",
            lambda c: _describe_waves(c),
            _serving,
            needs_kv=True,
            serving=True,
        ),
        EntryPoint(
            "capture_shapes",
            lambda c: (
                "the runner's dummy batches of vLLM's graph capture, eager: uniform decode at "
                f"{list(c.deployment.capture_sizes)} and a mixed batch"
            ),
            _capture,
            needs_kv=True,
            serving=True,
        ),
        EntryPoint(
            "sampler_warmup",
            lambda c: (
                "vLLM's own sampler warmup (the runner's dummy sampler run, which its memory "
                "profile and its V1 worker after sizing call): its dummy metadata's keys, such "
                "as top-k as int64 in the rejection sampler, which no served request reaches"
            ),
            _sampler_warmup,
            needs_kv=True,
        ),
    )
}


def _describe_waves(ctx: PrewarmContext) -> str:
    from launcher.runtime.prewarm.stage import serving_batches as sb

    shape = profile_shape(ctx)
    plan = sb.waves(shape)
    singles = [w.arrivals[0].prompt for w in plan if w.name.startswith("one prompt of")]
    longest = max(a.prompt for w in plan for a in w.arrivals)
    others = [w.name for w in plan if not w.name.startswith("one prompt of")]
    return (
        f"{len(plan)} waves through vLLM's scheduler, prompts up to {longest:,} tokens in "
        f"{shape.max_num_batched_tokens:,}-token chunks; single prompts of {singles}; "
        + "; ".join(others)
    )


def profile_shape(ctx: PrewarmContext):
    """The serving shape the profile implies (``prewarm --list``, no vLLM needed)."""
    from launcher.runtime.prewarm.stage import serving_batches as sb

    p, d = ctx.profile, ctx.deployment
    return sb.Shape(
        max_model_len=p.serving.max_model_len,
        max_num_batched_tokens=p.serving.max_num_batched_tokens,
        max_num_seqs=p.serving.max_num_seqs,
        spec_tokens=p.mtp_tokens,
        block_size=d.block_size,
        dcp=p.parallel.decode_context,
        capture_sizes=d.capture_sizes,
        index_topk=ctx.facts.index_topk,
    )


CPU_POINTS = ("serving_batches", "capture_shapes", "sampler_warmup")
"""On vLLM's CPU backend only the scratch stage's own batches apply (no GPU kernels to warm);
the integration tier runs them there on the real vLLM."""


def entry_points(ctx: PrewarmContext) -> list[EntryPoint]:
    """The runtime's entry points for this deployment, in the order they run."""
    points = [ENTRY_POINTS[name] for name in ctx.deployment.runtime.warmups]
    if ctx.profile.hardware.gpu == "cpu":
        return [e for e in points if e.name in CPU_POINTS]
    return [e for e in points if e.name != "moe_token_buckets" or ctx.facts.is_moe]


class VllmWarmupProvider:
    name = "vllm"
    provides = frozenset({Fact.LAUNCHED, Fact.SERVED_KERNELS})
    needs = uses = NONE

    def applies(self, ctx: PrewarmContext) -> bool:
        return bool(entry_points(ctx))

    def specializations(self, ctx: PrewarmContext) -> list[str]:
        from launcher.vllm import request_features

        runtime = ctx.deployment.runtime
        lines = [
            f"{e.name}: {e.describe(ctx)} [{runtime.name}]"
            + (" (on the scratch KV cache)" if e.needs_kv else "")
            for e in entry_points(ctx)
        ]
        if any(e.name == "serving_batches" for e in entry_points(ctx)):
            s = ctx.profile.serving
            features = request_features.describe(
                ctx.profile.mtp_tokens, s.max_logprobs, s.prompt_logprobs
            )
            lines += [f"request features served before sizing, {line}" for line in features]
        return lines

    def run(self, ctx: PrewarmContext) -> PrewarmResult:
        from launcher.runtime.prewarm.stage import scratch_kv

        result = PrewarmResult(self.name)
        start = time.perf_counter()
        if ctx.worker is None:
            result.skipped = "needs the vLLM worker (runs inside it before sizing)"
            return result
        points = entry_points(ctx)
        early = [e for e in points if not e.needs_kv]
        late = [e for e in points if e.needs_kv]
        notes: list[str] = []
        why = scratch_kv.unsupported(ctx.model_runner) if late else None
        pool = _inductor_pool(ctx)
        serving = Serving()
        try:
            _run_points(early, ctx, result, serving)
            if why:
                for e in late:
                    _report(result, e.name, "skipped", f"no scratch KV cache: {why}")
            elif late:
                notes += _stage(ctx, result, late, serving)
        finally:  # after the stage, also when it failed: no compile thread outlives it
            thread_samples.mark("vllm: the stage's release, compiles settled")
            _settle_compiling(ctx)
            said = pool.close()  # before vLLM's own steps: they compile as plain vLLM's do
            if ctx.log:
                ctx.log(said)
        result.skipped = "; ".join(notes)
        result.seconds = time.perf_counter() - start
        if serving.waves_ran:  # what serving launches is known: handed to the key enumeration
            result.handed[Fact.SERVED_KERNELS] = ServedKernels(frozenset(serving.launches))
        return result

    def freeze(self, ctx: PrewarmContext, on_late_compile, *, strict: bool = False) -> None:
        """vLLM's own ``--jit-monitor-mode`` and ``launcher.runtime.jit_watch`` watch compiles."""


def _inductor_pool(ctx: PrewarmContext) -> inductor_pool.InductorPool:
    """Inductor's compile processes for the passes (``inductor_pool``), a CUDA rank's share of
    the CPUs. None on vLLM's CPU backend, whose Inductor compiles C++, not Triton, nor on a boot
    that replays a restored artifact's keys: its caches hold what Inductor would compile, and
    the launch's ptxas pin (``launch.toolchain``) keys a kernel compiled in this process as the
    baked boot's pool keyed it (the pool on a replay cost about 8 s: docs/changelog.md,
    2026-12-04)."""
    hardware = ctx.profile.hardware
    cold = hardware.gpu != "cpu" and not ctx.replay
    asked = ctx.profile.prewarm.inductor_pool
    n = inductor_pool.processes(asked, ranks=hardware.count) if cold else 0
    return inductor_pool.InductorPool(n).start()


def _stage(
    ctx: PrewarmContext, result: PrewarmResult, late: list[EntryPoint], serving: Serving
) -> list[str]:
    """The entry points that need a KV cache, on the scratch KV stage; what its release
    removed or ended, as notes."""
    from launcher.runtime.prewarm.stage import scratch_kv
    from launcher.runtime.prewarm.stage.serving_batches import blocks_needed, waves

    notes: list[str] = []
    shape = _shape(ctx)
    blocks = blocks_needed(shape, waves(shape))
    stage = scratch_kv.scratch_kv(ctx.model_runner, blocks)
    try:
        scratch = stage.__enter__()
    except Exception as exc:  # the runtime could not build it: nothing to release
        for e in late:
            _report(result, e.name, "failed", f"scratch KV cache: {exc!r}")
        scratch = None
    if scratch is None:
        return notes
    ctx.scratch = scratch
    try:
        _run_points(late, ctx, result, serving)
        run_after_forward(ctx)  # the waves ran the model: its MoE units exist
    finally:
        ctx.scratch = None
        stage.__exit__(None, None, None)  # ScratchNotRestored stops the boot
    result.scratch = {
        "blocks": scratch.blocks,
        "bytes": scratch.bytes,
        "served": scratch.account,
        "forced": scratch.forced,
        "restored": scratch.restored.model_dump() if scratch.restored else None,
        "stray": scratch.stray,
    }
    result.serving_peak = scratch.serving_peak
    if ctx.log and scratch.restored:
        ctx.log(f"scratch KV released; runner restored: {scratch.restored.describe()}")
    if scratch.forced:
        notes.append(f"scratch release removed {', '.join(scratch.forced)}")
    if scratch.stray:
        notes.append(f"scratch release ended {'; '.join(scratch.stray)}")
    return notes


def _settle_compiling(ctx: PrewarmContext) -> None:
    """Wait for and load what the compile-only passes left compiling beside the later ones
    (``PrewarmContext.compiling``), and say what it cost here."""
    while ctx.compiling:
        compiling = ctx.compiling.pop(0)
        loaded, failed, waited = compiling.settle()
        if ctx.log:
            ctx.log(
                f"compile-only keys: {compiling.keys} compiled, the last {compiling.beside:.1f}s "
                f"after their pass ended, beside the passes after it; {loaded} loaded; waited "
                f"{waited:.1f}s for the last"
                + (f"; {len(failed)} dropped (compiled again if used): " if failed else "")
                + "; ".join(failed)
            )


def _report(
    result: PrewarmResult,
    name: str,
    status: str,
    detail: str,
    kernels: int | None = None,
    seconds: float | None = None,
) -> None:
    entry: dict[str, Any] = {"name": name, "status": status, "detail": detail}
    if kernels is not None:
        entry["kernels"] = kernels
    if seconds is not None:
        entry["seconds"] = round(seconds, 2)
    result.entry_points.append(entry)  # the one account (the worker logs it): not in notes


def _dynamo_graphs() -> int:
    """Graphs ``torch.compile`` traced in this process so far (Dynamo's own counter; 0 while
    torch is not loaded)."""
    utils = sys.modules.get("torch._dynamo.utils")
    return int(utils.counters["stats"]["unique_graphs"]) if utils is not None else 0


@dataclass
class Serving:
    """What the serving-shaped passes (waves, capture shapes, MoE buckets) launched so far,
    and whether the waves ran: then it is what serving launches."""

    launches: set[str] = field(default_factory=set)
    waves_ran: bool = False


def _run_points(
    points: list[EntryPoint], ctx: PrewarmContext, result: PrewarmResult, serving: Serving
) -> None:
    """Call each entry point's thunks; count the Triton kernels each brought in."""
    from launcher.runtime import jit_watch

    for ep in points:
        thread_samples.mark(ep.name)
        try:
            found = ep.find(ctx)
        except Exception as exc:  # the runtime lacks what the finder reads
            _report(result, ep.name, "failed", f"{type(exc).__name__}: {exc}")
            continue
        if isinstance(found, str):
            status, _, detail = found.partition(": ")
            _report(result, ep.name, status, detail or found)
            continue
        for label, thunk in found:
            before, graphs_before = jit_watch.loaded(), _dynamo_graphs()
            t0 = time.perf_counter()
            try:
                if ep.serving:
                    kernels: set[str] = set()
                    early = getattr(ctx, "early", None)
                    try:
                        with jit_watch.launched_in_block() as kernels:
                            if early is not None:  # its enumerations read the live set
                                early.served = (serving.launches, kernels)
                            thunk()
                    finally:
                        # after the block's exit, which adds what compiled inside it: a kernel
                        # whose module the waves imported (xgrammar's) has no wrapper to count it
                        serving.launches |= kernels
                        if early is not None:
                            early.submit()
                    # the waves ran: what serving launches is known from now on
                    serving.waves_ran |= ep.name == "serving_batches"
                else:
                    thunk()
            except Exception as exc:  # reported; vLLM's own warmup runs it again after sizing
                _report(
                    result,
                    label,
                    "failed",
                    f"{type(exc).__name__}: {exc}",
                    sum(jit_watch.new_since(before).values()),
                    time.perf_counter() - t0,
                )
                continue
            new = jit_watch.new_since(before)
            kernels = sum(new.values())
            graphs = _dynamo_graphs() - graphs_before
            took = f"{time.perf_counter() - t0:.2f}s"
            result.compiled += kernels
            result.warmed += 1
            if graphs and not kernels:  # Inductor's kernels do not go through Triton's JIT
                _report(
                    result,
                    label,
                    "called",
                    f"{graphs} torch.compile graphs traced and compiled in {took}",
                    0,
                    time.perf_counter() - t0,
                )
            elif kernels:
                names = ", ".join(f"{k.rsplit('.', 1)[-1]} x{n}" for k, n in sorted(new.items()))
                result.specializations.append(f"{label}: {names}")
                _report(
                    result,
                    label,
                    "called",
                    f"{kernels} Triton kernels in {took}: {names}",
                    kernels,
                    time.perf_counter() - t0,
                )
            else:
                _report(
                    result,
                    label,
                    "no-op",
                    f"brought in 0 Triton kernels in {took} (other kernels are not counted)",
                    0,
                    time.perf_counter() - t0,
                )
