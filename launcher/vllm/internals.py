"""Every vLLM internal the planned worker's stage uses, declared once.

No plugin interface promises these names: module paths, classes, attributes, method
signatures, kernel launchers, and the two methods the stage patches. Each entry says what
depends on it (``needed_by``: ``worker`` always; a prewarm provider's name when the profile
runs it) and what happens without it:

- ``refuse``: the boot cannot be what the plan says; the worker refuses before the weights
  load, naming the entry.
- ``skip``: the part is not done; the entry names the cost (kernels compile after sizing, a
  figure the plan estimates instead of measures).
- ``fallback``: another declared way is taken (an entry of the same ``group`` or the plan's
  own figure), named.

``releases.json`` (written by ``python -m launcher.vllm.scan``) says which entries each
supported release has; ``check`` resolves them on the installed vLLM before the weights load;
the runtime reads a name through ``resolve`` (the object, or a typed ``Missing``), never
through ``getattr`` with a default.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["module", "function", "class", "method", "attribute", "kernel", "assigned"]
"""``assigned``: an attribute vLLM sets on an object it does not define as a class member (the
model's ``aot_compiled_fn``, set by ``support_torch_compile``'s generated code; a MoE layer's
``w13_weight``, registered by its quant method); ``module`` is where vLLM sets it and ``path``
the attribute's name. The scanner looks for the assignment in that one module; where a release
sets it elsewhere, that module is another entry of the same ``group``, as for a moved function
(a package-wide search would accept any model file's ``.w13_weight = ...``, and a check that
accepts anything says nothing)."""
WithoutKind = Literal["refuse", "skip", "fallback"]


@dataclass(frozen=True)
class Without:
    """What happens on a release that lacks the entry."""

    kind: WithoutKind
    says: str
    """The refusal's reason, the skip's cost, or the fallback taken."""


def refuse(why: str) -> Without:
    return Without("refuse", why)


def skip(cost: str) -> Without:
    return Without("skip", cost)


def fallback(what: str) -> Without:
    return Without("fallback", what)


@dataclass(frozen=True)
class Patch:
    """A rebinding of the entry by the stage, and how it is undone."""

    by: str
    """The launcher module that rebinds it."""
    restore: str


@dataclass(frozen=True)
class Internal:
    name: str
    """The entry's own name (``worker.profile_run``): what the table, the record and a
    refusal say."""
    module: str
    path: str | None
    """``name`` or ``Class.member`` in ``module``; the attribute's name for ``assigned``;
    None: the module itself."""
    kind: Kind
    needed_by: str
    """``worker`` (every planned boot), ``cuda`` (every boot on a GPU), or a prewarm
    provider's name (boots whose profile runs it)."""
    without: Without
    params: tuple[str, ...] = ()
    """Parameter names the launcher passes or relies on, in order (a prefix of vLLM's)."""
    exact: bool = False
    """The parameters must be exactly ``params``: a wrapper with a fixed signature."""
    patch: Patch | None = None
    fork_only: bool = False
    """Needed only on a fork line (a ``vllm.lines`` line with marker files): the
    fork's backends and warmups, which upstream releases do not promise."""
    group: str | None = None
    """Alternatives: one present entry of the group is enough."""

    @property
    def where(self) -> str:
        if self.kind == "assigned":
            return f"{self.module} (sets .{self.path})"
        return self.module if self.path is None else f"{self.module}:{self.path}"


LATE = "compile after sizing, and the next plan reserves more for them"

GPU_WORKER = "vllm.v1.worker.gpu_worker"
CPU_WORKER = "vllm.v1.worker.cpu_worker"
RUNNER = "vllm.v1.worker.gpu_model_runner"
KV = "vllm.v1.kv_cache_interface"
KV_UTILS = "vllm.v1.core.kv_cache_utils"
KV_PLANNING = "vllm.v1.core.kv_cache_planning"
CONFIG = "vllm.config"
WARMUP = "vllm.model_executor.warmup"
MLA = "vllm.v1.attention.backends.mla"
DCP = "vllm.v1.attention.ops.dcp"
FUSED_MOE = "vllm.model_executor.layers.fused_moe"
EXPERTS = f"{FUSED_MOE}.routed_experts:RoutedExperts"
EAGLE = "vllm.v1.spec_decode.eagle"
ATTENTION = "vllm.model_executor.layers.attention.attention"


def _m(name: str, module: str, needed_by: str, without: Without, **kw: Any) -> Internal:
    return Internal(name, module, None, "module", needed_by, without, **kw)


def _f(
    name: str, where: str, needed_by: str, without: Without, kind: Kind | None = None, **kw: Any
) -> Internal:
    module, _, path = where.partition(":")
    kind = kind or ("method" if "." in path else "function")
    return Internal(name, module, path, kind, needed_by, without, **kw)


def _a(name: str, where: str, needed_by: str, without: Without, **kw: Any) -> Internal:
    return _f(name, where, needed_by, without, kind="attribute", **kw)


def _set(name: str, where: str, needed_by: str, without: Without, **kw: Any) -> Internal:
    """``module:attr``: an attribute ``module`` sets on a live object (kind ``assigned``)."""
    return _f(name, where, needed_by, without, kind="assigned", **kw)


_NO_WORKER = refuse("the planned worker subclasses it; without it there is no planned worker")
_NO_SIZING = refuse("the worker sizes the KV cache through it; a boot without it is not planned")
_MOE_TABLES = (
    "the MoE buckets' tile-config changes are not asked for a quantised layer: its own "
    "table's configs " + LATE
)
_NO_LAYERS = (
    "the scratch stage finds no attention layers and saves no graph settings: it puts back "
    "only the runner's own state"
)
_NO_SCRATCH = skip("no scratch KV stage: serving's kernels (attention, sampler) " + LATE)

DECLARED: tuple[Internal, ...] = (
    # -- the worker: what the planned worker subclasses and wraps
    _f("worker.gpu", f"{GPU_WORKER}:Worker", "cuda", _NO_WORKER, kind="class"),
    _f("worker.cpu", f"{CPU_WORKER}:CPUWorker", "worker", _NO_WORKER, kind="class"),
    _f(
        "worker.load_model",
        f"{GPU_WORKER}:Worker.load_model",
        "worker",
        _NO_SIZING,
        params=("self",),
    ),
    _f(
        "worker.determine_available_memory",
        f"{GPU_WORKER}:Worker.determine_available_memory",
        "worker",
        _NO_SIZING,
        params=("self",),
        exact=True,
    ),
    _f(
        "worker.initialize_from_config",
        f"{GPU_WORKER}:Worker.initialize_from_config",
        "worker",
        _NO_SIZING,
        params=("self", "kv_cache_config"),
        exact=True,
    ),
    _f(
        "worker.compile_or_warm_up_model",
        f"{GPU_WORKER}:Worker.compile_or_warm_up_model",
        "worker",
        refuse("the worker measures the CUDA-graph pool around it"),
        params=("self",),
        exact=True,
    ),
    _f(
        "monitor.is_active",
        "vllm.utils.jit_monitor:is_active",
        "cuda",
        skip("vLLM's own JIT monitor is not known to be on: the record reads it as not measured"),
    ),
    _a(
        "worker.peak_activation_memory",
        f"{GPU_WORKER}:Worker.peak_activation_memory",
        "cuda",
        fallback(
            "the worker's own probe of torch's peak around profile_run; without both, "
            "the plan's activation estimate"
        ),
    ),
    _a(
        "worker.cudagraph_memory_estimate",
        f"{GPU_WORKER}:Worker.cudagraph_memory_estimate",
        "cuda",
        fallback("the plan's cudagraph_pool, until a boot measures the pool"),
    ),
    _f(
        "runner.profile_run",
        f"{RUNNER}:GPUModelRunner.profile_run",
        "cuda",
        skip(
            "the activation peak is not probed: vLLM's own figure (which may include its "
            "CUDA-graph estimate), else the plan's, is reserved"
        ),
        params=("self",),
    ),
    _f(
        "runner.execute_model",
        f"{RUNNER}:GPUModelRunner.execute_model",
        "worker",
        skip("serving steps are not watched: the serving low-water figure is not read"),
    ),
    _f(
        "runner.get_model",
        f"{RUNNER}:GPUModelRunner.get_model",
        "worker",
        skip("the model's compiled parts are not found: compile-directory links not made"),
        params=("self",),
    ),
    _a(
        "runner.drafter",
        f"{RUNNER}:GPUModelRunner.drafter",
        "worker",
        skip("the MTP drafter's model is not prewarmed: its kernels " + LATE),
    ),
    _f(
        "world_group",
        "vllm.distributed.parallel_state:get_world_group",
        "worker",
        refuse("the ranks meet on vLLM's CPU world group after the prewarm"),
    ),
    _f(
        "set_current_vllm_config",
        f"{CONFIG}:set_current_vllm_config",
        "worker",
        refuse("the prewarm runs vLLM's warmups inside the worker's config context"),
    ),
    _a(
        "kv.num_blocks",
        f"{KV}:KVCacheConfig.num_blocks",
        "worker",
        refuse("the record's KV blocks are read from it"),
    ),
    _a(
        "kv.kv_cache_tensors",
        f"{KV}:KVCacheConfig.kv_cache_tensors",
        "worker",
        skip(
            "what vLLM allocates beside the KV cache is not measured: the next plan keeps "
            "its estimate for it"
        ),
    ),
    _a(
        "kv.tensor_size",
        f"{KV}:KVCacheTensor.size",
        "worker",
        skip("what vLLM allocates beside the KV cache is not measured"),
    ),
    _a(
        "worker.model_runner",
        f"{GPU_WORKER}:Worker.model_runner",
        "worker",
        skip(
            "the prewarm runs without the model runner: the providers that read it find "
            "nothing, their kernels " + LATE
        ),
    ),
    _a(
        "worker.vllm_config",
        f"{GPU_WORKER}:Worker.vllm_config",
        "worker",
        fallback("vLLM's warmups run outside its config context (as with no config)"),
    ),
    _f(
        "runner.capture_model",
        f"{RUNNER}:GPUModelRunner.capture_model",
        "worker",
        skip("the CUDA-graph capture is not timed as a phase of its own (it counts as warmup)"),
        params=("self",),
    ),
    _a(
        "runner.model",
        f"{RUNNER}:GPUModelRunner.model",
        "vllm",
        skip(
            "the loaded model's layers are not found: the attention methods, MoE buckets and "
            "EXL3 units are not prewarmed, their kernels " + LATE
        ),
    ),
    _a(
        "runner.device",
        f"{RUNNER}:GPUModelRunner.device",
        "vllm",
        fallback(
            "torch's current device counts the scratch cache's bytes; the served waves' "
            "transient peak is not measured (0)"
        ),
    ),
    _a(
        "runner.vllm_config",
        f"{RUNNER}:GPUModelRunner.vllm_config",
        "vllm",
        fallback(_NO_LAYERS),
    ),
    _a(
        "drafter.model",
        f"{EAGLE}:EagleProposer.model",
        "worker",
        skip(
            "the MTP drafter's model is left out: its EXL3 units are not prewarmed and its "
            "compiled parts not linked into the compile directory"
        ),
    ),
    _a(
        "drafter.dispatcher",
        f"{EAGLE}:EagleProposer.cudagraph_dispatcher",
        "vllm",
        skip(
            "the drafter's graph dispatcher is not held eager: a graph it captures on the "
            "scratch cache is dropped at the release"
        ),
    ),
    _a(
        "attention.impl",
        f"{ATTENTION}:Attention.impl",
        "vllm",
        skip(
            "the attention layers' implementations are not found: their prewarm methods are "
            "not run and their bindings not checked at the release"
        ),
    ),
    _a(
        "attention.kv_cache",
        f"{ATTENTION}:Attention.kv_cache",
        "vllm",
        fallback(
            "the scratch cache's tensors are found through the runner's kv_caches alone "
            "(a layer's own binding is not checked as freed)"
        ),
    ),
    # -- the live config the stage reads (serving_batches.shape_of, keys, dcp_params)
    *(
        _a(
            f"config.{cls}.{field}",
            f"{CONFIG}:{cls}.{field}",
            "vllm",
            refuse(f"the scratch stage sizes its waves from {cls}.{field}"),
        )
        for cls, field in (
            ("ModelConfig", "max_model_len"),
            ("ModelConfig", "get_vocab_size"),
            ("ModelConfig", "max_logprobs"),
            ("SchedulerConfig", "max_num_batched_tokens"),
            ("SchedulerConfig", "max_num_seqs"),
            ("CacheConfig", "block_size"),
            ("ParallelConfig", "decode_context_parallel_size"),
            ("CompilationConfig", "cudagraph_capture_sizes"),
            ("VllmConfig", "speculative_config"),
        )
    ),
    _a(
        "serving.device_type",
        f"{CONFIG}:DeviceConfig.device_type",
        "vllm",
        fallback("the device is taken for a GPU: the waves sample"),
    ),
    _a(
        "config.compilation_config",
        f"{CONFIG}:VllmConfig.compilation_config",
        "vllm",
        fallback(_NO_LAYERS),
    ),
    # the keys provider's live counts (keys.ranges_of): the profile's own outside a worker
    *(
        _a(
            f"keys.{field}",
            f"{CONFIG}:{cls}.{field}",
            "keys",
            fallback(f"the profile's {what} (as outside a worker)"),
        )
        for cls, field, what in (
            ("VllmConfig", "scheduler_config", "request and token counts"),
            ("SchedulerConfig", "max_num_seqs", "serving.max_num_seqs"),
            ("SchedulerConfig", "max_num_batched_tokens", "serving.max_num_batched_tokens"),
            ("VllmConfig", "speculative_config", "mtp_tokens"),
            ("SpeculativeConfig", "num_speculative_tokens", "mtp_tokens"),
            ("VllmConfig", "model_config", "serving.max_logprobs"),
        )
    ),
    _a(
        "stage.spec_tokens",
        f"{CONFIG}:SpeculativeConfig.num_speculative_tokens",
        "vllm",
        refuse(
            "the stage sizes its draft rows (max_num_seqs x (1 + speculative tokens)) from it; "
            "without it the rejection sampler's keys would compile after sizing"
        ),
    ),
    _a(
        "keys.live_config",
        f"{GPU_WORKER}:Worker.vllm_config",
        "keys",
        fallback("the profile's counts (as outside a worker)"),
    ),
    _a(
        "config.interleave",
        f"{CONFIG}:ParallelConfig.cp_kv_cache_interleave_size",
        "triton",
        fallback("interleave 1 (no DCP interleave on such a release)"),
    ),
    _a(
        "config.kernel_config",
        f"{CONFIG}:VllmConfig.kernel_config",
        "vllm",
        skip("vLLM's JIT warmup registry is not run before sizing: its kernels " + LATE),
    ),
    _a(
        "config.enable_jit_warmup",
        f"{CONFIG}:KernelConfig.enable_jit_warmup",
        "vllm",
        skip("vLLM's JIT warmup registry is not run before sizing: its kernels " + LATE),
    ),
    # -- the compiled pieces' directory (runtime/compile_dir.py): the two class-level patches
    _f(
        "compile.backend_call",
        "vllm.compilation.backends:VllmBackend.__call__",
        "cuda",
        skip(
            "the compile directory is not recorded: an artifact bakes no AOT graph and a "
            "fresh node compiles the model again"
        ),
        params=("self", "graph", "example_inputs"),
        exact=True,
        patch=Patch(
            "launcher.runtime.compile_dir",
            "none: permanent for the process, marked _blaunch so it wraps once",
        ),
    ),
    _f(
        "compile.adaptor_load",
        "vllm.compilation.compiler_interface:InductorStandaloneAdaptor.load",
        "cuda",
        skip(
            "pieces are loaded only where vLLM named them: a restored artifact's pieces "
            "beside the directory compile again"
        ),
        params=("self", "handle"),
        patch=Patch(
            "launcher.runtime.compile_dir",
            "none: permanent for the process, marked _blaunch so it wraps once",
        ),
    ),
    _a(
        "compile.local_cache_dir",
        f"{CONFIG}:CompilationConfig.local_cache_dir",
        "cuda",
        skip("the compile directory is not recorded"),
    ),
    _a(
        "compile.traced_files",
        f"{CONFIG}:CompilationConfig.traced_files",
        "cuda",
        skip("the compile directory is not recorded"),
    ),
    _a(
        "compile.cache_dir",
        f"{CONFIG}:CompilationConfig.cache_dir",
        "cuda",
        skip("the compile directory is not recorded"),
    ),
    _a(
        "compile.piece_prefix",
        "vllm.compilation.caching:VllmSerializableFunction.prefix",
        "cuda",
        skip("the compile directory is not recorded"),
    ),
    *(
        _set(
            f"compile.{attr}",
            f"vllm.compilation.decorators:{attr}",
            "cuda",
            skip(
                "the parts vLLM AOT-compiled on this boot are not found on the model: their "
                "pieces are not linked where a warm boot looks, so it compiles them again"
            ),
        )
        for attr in ("aot_compiled_fn", "was_aot_compile_fn_loaded_from_disk")
    ),
    _a(
        "compile.static_forward_context",
        f"{CONFIG}:CompilationConfig.static_forward_context",
        "vllm",
        _NO_SCRATCH,
    ),
    # -- the scratch KV stage and its served waves (runtime/prewarm/stage/: scratch_kv,
    #    serving_batches)
    _f(
        "scratch.initialize_kv_cache",
        f"{RUNNER}:GPUModelRunner.initialize_kv_cache",
        "vllm",
        _NO_SCRATCH,
        params=("self", "kv_cache_config"),
    ),
    _f(
        "scratch.get_kv_cache_spec",
        f"{RUNNER}:GPUModelRunner.get_kv_cache_spec",
        "vllm",
        _NO_SCRATCH,
        params=("self",),
    ),
    _f(
        "scratch.cleanup",
        f"{RUNNER}:GPUModelRunner._cleanup_profiling_kv_cache",
        "vllm",
        fallback("the stage's own release of the layers' bindings"),
        params=("self",),
    ),
    _f(
        "scratch.dummy_run",
        f"{RUNNER}:GPUModelRunner._dummy_run",
        "vllm",
        skip("the capture shapes are not run eagerly: their kernels " + LATE),
        params=("self", "num_tokens"),
    ),
    _f(
        "scratch.dummy_sampler_run",
        f"{RUNNER}:GPUModelRunner._dummy_sampler_run",
        "vllm",
        skip(
            "vLLM's own sampler warmup does not run in the stage: what its dummy metadata "
            "reaches and serving does not (top-k as int64 in the rejection sampler's expand "
            "kernel) compiles in vLLM's memory profile, outside the stage"
        ),
        params=("self", "hidden_states"),
    ),
    _f(
        "scratch.kv_config_from_groups",
        f"{KV_UTILS}:get_kv_cache_config_from_groups",
        "vllm",
        fallback("vllm.v1.core.kv_cache_planning (0.33 moved it there)"),
        params=("vllm_config", "kv_cache_groups", "available_memory"),
        group="kv_config_from_groups",
    ),
    _f(
        "scratch.kv_config_from_groups_planning",
        f"{KV_PLANNING}:get_kv_cache_config_from_groups",
        "vllm",
        _NO_SCRATCH,
        params=("vllm_config", "kv_cache_groups", "available_memory"),
        group="kv_config_from_groups",
    ),
    _f(
        "scratch.kv_groups",
        f"{KV_UTILS}:get_kv_cache_groups",
        "vllm",
        fallback("vllm.v1.core.kv_cache_planning (0.33 moved it there)"),
        params=("vllm_config", "kv_cache_spec"),
        group="kv_groups",
    ),
    _f(
        "scratch.kv_groups_planning",
        f"{KV_PLANNING}:get_kv_cache_groups",
        "vllm",
        _NO_SCRATCH,
        params=("vllm_config", "kv_cache_spec"),
        group="kv_groups",
    ),
    _f(
        "scratch.graph_wrapper",
        "vllm.compilation.cuda_graph:CUDAGraphWrapper",
        "vllm",
        _NO_SCRATCH,
        kind="class",
    ),
    _f(
        "scratch.minimal_cache",
        f"{RUNNER}:GPUModelRunner._init_minimal_kv_cache_for_profiling",
        "vllm",
        fallback(
            "the runner is treated as the older layout: its scratch cache is released "
            "by the stage's own unbinding"
        ),
    ),
    _f(
        "scratch.kv_zero_meta",
        f"{RUNNER}:GPUModelRunner._init_kv_zero_meta",
        "vllm",
        skip("a scratch cache that needs zeroing is served without vLLM's zeroing metadata"),
    ),
    _a(
        "scratch.dispatcher",
        f"{RUNNER}:GPUModelRunner.cudagraph_dispatcher",
        "vllm",
        skip(
            "the graph dispatchers are not held eager: the stage captures no graph, so it "
            "serves without the scratch cache"
        ),
    ),
    _a(
        "scratch.keys_initialized",
        "vllm.v1.cudagraph_dispatcher:CudagraphDispatcher.keys_initialized",
        "vllm",
        skip("the graph dispatchers are not held eager"),
    ),
    _a("scratch.input_batch", f"{RUNNER}:GPUModelRunner.input_batch", "vllm", _NO_SCRATCH),
    _f(
        "scratch.remove_request",
        "vllm.v1.worker.gpu_input_batch:InputBatch.remove_request",
        "vllm",
        _NO_SCRATCH,
        params=("self", "req_id"),
    ),
    _f(
        "scratch.condense",
        "vllm.v1.worker.gpu_input_batch:InputBatch.condense",
        "vllm",
        _NO_SCRATCH,
        params=("self",),
    ),
    _a("scratch.requests", f"{RUNNER}:GPUModelRunner.requests", "vllm", _NO_SCRATCH),
    _a(
        "scratch.kv_cache_config",
        f"{RUNNER}:GPUModelRunner.kv_cache_config",
        "vllm",
        skip("a runner's KV cache config is not seen: a held one is not refused before the stage"),
    ),
    _a(
        "scratch.draft_token_ids",
        f"{RUNNER}:GPUModelRunner._draft_token_ids",
        "vllm",
        skip("a drafter's proposals from the stage's steps are not cleared"),
    ),
    _a("scratch.kv_caches", f"{RUNNER}:GPUModelRunner.kv_caches", "vllm", _NO_SCRATCH),
    _a("scratch.attn_groups", f"{RUNNER}:GPUModelRunner.attn_groups", "vllm", _NO_SCRATCH),
    _a(
        "scratch.blocks_override",
        f"{CONFIG}:CacheConfig.num_gpu_blocks_override",
        "vllm",
        _NO_SCRATCH,
    ),
    _a(
        "scratch.needs_zeroing",
        f"{KV}:KVCacheConfig.needs_kv_cache_zeroing",
        "vllm",
        fallback("no zeroing metadata made for the scratch cache"),
    ),
    _a(
        "scratch.block_table",
        "vllm.v1.worker.gpu_input_batch:InputBatch.block_table",
        "vllm",
        skip(
            "the released requests' rows of block ids are not cleared: vLLM's own dummy "
            "batches after the stage may read stale ids"
        ),
    ),
    _a(
        "scratch.num_reqs",
        "vllm.v1.worker.gpu_input_batch:InputBatch.num_reqs",
        "vllm",
        fallback("rows left in the input batch are not among the release's leftovers"),
    ),
    _a(
        "scratch.num_gpu_blocks",
        f"{CONFIG}:CacheConfig.num_gpu_blocks",
        "vllm",
        fallback("the cache config's block count is not among the release's leftovers"),
    ),
    _f(
        "serving.execute_model",
        f"{GPU_WORKER}:Worker.execute_model",
        "vllm",
        _NO_SCRATCH,
        params=("self", "scheduler_output"),
    ),
    _f(
        "serving.sample_tokens",
        f"{GPU_WORKER}:Worker.sample_tokens",
        "vllm",
        _NO_SCRATCH,
        params=("self", "grammar_output"),
    ),
    _f(
        "serving.take_drafts",
        f"{GPU_WORKER}:Worker.take_draft_token_ids",
        "vllm",
        _NO_SCRATCH,
        params=("self",),
    ),
    _f(
        "serving.scheduler_cls",
        f"{CONFIG}:SchedulerConfig.get_scheduler_cls",
        "vllm",
        _NO_SCRATCH,
        params=("self",),
    ),
    _a(
        "helpers.async_spec",
        f"{RUNNER}:GPUModelRunner.use_async_spec_decode",
        "vllm",
        skip("the compiled helper of async speculative decoding compiles on first use"),
    ),
    _a(
        "helpers.max_num_reqs",
        f"{RUNNER}:GPUModelRunner.max_num_reqs",
        "vllm",
        skip("the compiled helper of async speculative decoding compiles on first use"),
    ),
    _a(
        "dcp.rank",
        f"{RUNNER}:GPUModelRunner.dcp_rank",
        "triton",
        fallback("vllm.distributed:get_dcp_group().rank_in_group"),
    ),
    _f(
        "dcp.group",
        "vllm.distributed:get_dcp_group",
        "triton",
        refuse("the DCP rank picks the kernels' specializations"),
    ),
    _f(
        "serving.scheduler",
        "vllm.v1.core.sched.scheduler:Scheduler",
        "vllm",
        _NO_SCRATCH,
        kind="class",
    ),
    _f("serving.request", "vllm.v1.request:Request", "vllm", _NO_SCRATCH, kind="class"),
    _f(
        "serving.sampling_params",
        "vllm.sampling_params:SamplingParams",
        "vllm",
        _NO_SCRATCH,
        kind="class",
    ),
    _f(
        "serving.structured_output",
        "vllm.v1.structured_output:StructuredOutputManager",
        "vllm",
        _NO_SCRATCH,
        kind="class",
    ),
    _f(
        "serving.grammar_output",
        "vllm.v1.core.sched.output:GrammarOutput",
        "vllm",
        _NO_SCRATCH,
        kind="class",
    ),
    _f(
        "serving.hash_fn",
        "vllm.utils.hashing:get_hash_fn_by_name",
        "vllm",
        fallback("the scheduler's default prefix-cache hash"),
    ),
    _f(
        "serving.scheduler_kv_config",
        f"{KV_UTILS}:generate_scheduler_kv_cache_config",
        "vllm",
        fallback("the worker's KV config handed to the scheduler as it is"),
    ),
    _f(
        "serving.block_sizes",
        f"{KV_UTILS}:resolve_kv_cache_block_sizes",
        "vllm",
        fallback("the cache config's block size"),
    ),
    _f(
        "serving.forward_context",
        "vllm.forward_context:set_forward_context",
        "vllm",
        skip("the MoE buckets are not run: their Triton kernels " + LATE),
    ),
    _f(
        "serving.batch_change",
        "vllm.v1.spec_decode.utils:update_num_computed_tokens_for_batch_change",
        "vllm",
        skip("the compiled helper of async speculative decoding compiles on first use"),
    ),
    # -- vLLM's own warmups the vllm provider calls (runtime/prewarm/providers/vllm_warmup.py)
    _f(
        "warmup.b12x",
        f"{WARMUP}.b12x_warmup:b12x_warmup",
        "vllm",
        skip("b12x's paged-attention warmup runs in vLLM's kernel_warmup, after sizing"),
        params=("worker",),
    ),
    _f(
        "warmup.sparse_mla_triton",
        f"{WARMUP}.sparse_mla_triton_warmup:sparse_mla_triton_warmup_if_needed",
        "vllm",
        skip("the fork's sparse-MLA Triton warmup runs after sizing: its kernels " + LATE),
        params=("worker",),
        fork_only=True,
    ),
    _f(
        "warmup.b12x_prepare",
        "vllm.v1.worker.b12x_startup:begin_b12x_preparation",
        "vllm",
        fallback("vllm.model_executor.warmup.b12x_prepare"),
        fork_only=True,
        group="b12x_prepare",
    ),
    _f(
        "warmup.b12x_prepare_alt",
        f"{WARMUP}.b12x_prepare:begin_b12x_preparation",
        "vllm",
        skip("the b12x-package line's weights preparation runs after sizing: its kernels " + LATE),
        fork_only=True,
        group="b12x_prepare",
    ),
    _f(
        "warmup.block_table",
        f"{WARMUP}.v1_block_table_warmup:warm_v1_block_table_kernels",
        "vllm",
        skip("the block-table kernels " + LATE),
    ),
    _f(
        "warmup.deep_gemm",
        f"{WARMUP}.deep_gemm_warmup:deep_gemm_warmup",
        "vllm",
        skip("DeepGEMM's kernels " + LATE),
        params=("model",),
    ),
    _m("warmup.envs", "vllm.envs", "vllm", skip("DeepGEMM's warmup is not run")),
    _f(
        "warmup.deep_gemm_supported",
        "vllm.utils.deep_gemm:is_deep_gemm_supported",
        "vllm",
        skip("DeepGEMM's warmup is not run"),
    ),
    _f(
        "warmup.jit_registry",
        f"{WARMUP}.jit_warmup:JitWarmupRegistry",
        "vllm",
        skip("vLLM's JIT warmup registry is not run before sizing: its kernels " + LATE),
        kind="class",
    ),
    # the runner's registry: set in the runner's __init__ (0.29), then by the
    # JitWarmupRegistry.capture decorator on it (0.30 on)
    _set(
        "warmup.runner_jit_registry",
        f"{RUNNER}:jit_warmup_registry",
        "vllm",
        fallback(f"the registry {WARMUP}.jit_warmup's capture sets on the runner (0.30 on)"),
        group="runner_jit_registry",
    ),
    _set(
        "warmup.runner_jit_registry_capture",
        f"{WARMUP}.jit_warmup:jit_warmup_registry",
        "vllm",
        skip("vLLM's JIT warmup registry is not run before sizing: its kernels " + LATE),
        group="runner_jit_registry",
    ),
    _set(
        "warmup.ckv_extend_plan",
        f"{MLA}.b12x_mla_sparse:_ckv_extend_plan",
        "vllm",
        fallback(
            "the attention plan's log line leaves out the full-CKV local-head note (the "
            "impl's prewarm method runs as before)"
        ),
        fork_only=True,
    ),
    # -- Triton launchers the triton provider runs (runtime/prewarm/providers/triton_kernels.py)
    _f(
        "triton.correct_attn_out",
        f"{DCP}:correct_attn_out",
        "triton",
        fallback("vllm.v1.attention.ops.common:correct_attn_out"),
        group="correct_attn_out",
        params=("out", "lses", "cp_rank", "ctx"),
    ),
    _f(
        "triton.correct_attn_out_common",
        "vllm.v1.attention.ops.common:correct_attn_out",
        "triton",
        skip("the DCP combine kernels " + LATE),
        group="correct_attn_out",
        params=("out", "lses", "cp_rank", "ctx"),
    ),
    _f(
        "triton.correct_attn_out_old",
        "vllm.attention.ops.common:correct_attn_out",
        "triton",
        skip("the DCP combine kernels " + LATE),
        group="correct_attn_out",
        params=("out", "lses", "cp_rank", "ctx"),
    ),
    _f(
        "triton.a2a_pack",
        f"{DCP}:_dcp_a2a_pack_send",
        "triton",
        skip("the DCP all-to-all pack kernels " + LATE),
    ),
    _f(
        "triton.a2a_combine",
        f"{DCP}:_dcp_a2a_unpack_combine",
        "triton",
        skip("the DCP all-to-all combine kernels " + LATE),
    ),
    _f(
        "triton.mask_empty_context",
        "vllm.v1.attention.ops.triton_merge_attn_states:mask_empty_context",
        "triton",
        skip("the empty-context mask kernels " + LATE),
    ),
    _m(
        "triton.b12x_backend",
        f"{MLA}.b12x_mla_sparse",
        "triton",
        skip("the fork's sparse-MLA kernels " + LATE),
        fork_only=True,
    ),
    _f(
        "triton.indexer_chunks",
        f"{MLA}.indexer:build_prefill_chunk_metadata",
        "triton",
        skip("the indexer's prefill chunk metadata kernels " + LATE),
        fork_only=True,
    ),
    _f(
        "triton.filter_dcp_index",
        f"{MLA}.sparse_utils:triton_filter_and_convert_dcp_index",
        "triton",
        skip("the DCP index filter kernels " + LATE),
        fork_only=True,
    ),
    # -- kernels the worker's threads compile ahead (sampler_ahead, moe_buckets)
    _f(
        "kernel.topk_topp",
        "vllm.v1.sample.ops.topk_topp_triton:_topk_topp_kernel",
        "vllm",
        skip("the sampler's top-k/top-p kernel compiles in the waves, not ahead"),
        kind="kernel",
    ),
    _f(
        "kernel.topk_topp_wrapper",
        "vllm.v1.sample.ops.topk_topp_triton:apply_top_k_top_p_triton",
        "vllm",
        skip("the sampler's top-k/top-p kernel compiles in the waves, not ahead"),
    ),
    _f(
        "kernel.fused_moe",
        "vllm.model_executor.layers.fused_moe.fused_moe:fused_moe_kernel",
        "vllm",
        skip("the MoE buckets are not compiled ahead: their kernels " + LATE),
        kind="kernel",
    ),
    _f(
        "kernel.moe_config",
        "vllm.model_executor.layers.fused_moe.fused_moe:try_get_optimal_moe_config",
        "vllm",
        skip("the MoE buckets are not compiled ahead: their kernels " + LATE),
    ),
    _a(
        "moe.quant_config",
        f"{FUSED_MOE}.fused_moe_method_base:FusedMoEMethodBase.moe_quant_config",
        "vllm",
        skip(_MOE_TABLES),
    ),
    _a(
        "moe.block_shape",
        f"{FUSED_MOE}.config:FusedMoEQuantConfig.block_shape",
        "vllm",
        skip(_MOE_TABLES),
    ),
    _f(
        "moe.config_name",
        f"{FUSED_MOE}.config:FusedMoEQuantConfig.config_name",
        "vllm",
        skip(_MOE_TABLES),
        params=("self", "dtype"),
    ),
    _a(
        "moe.routed_experts",
        f"{FUSED_MOE}.runner.moe_runner:MoERunner.routed_experts",
        "vllm",
        skip(
            "a layer holding its expert weights elsewhere is not found: its MoE buckets "
            "are not run, their kernels " + LATE
        ),
    ),
    # the expert weights the quant method registers on the layer (the unquantised method's
    # module: every layer's weights are named as it names them)
    *(
        _set(
            f"moe.{weight}",
            f"{FUSED_MOE}.unquantized_fused_moe_method:{weight}",
            "vllm",
            skip(
                "the fused-MoE layers' expert weights are not found: the MoE buckets are not "
                "run, their kernels " + LATE
            ),
        )
        for weight in ("w13_weight", "w2_weight")
    ),
    *(
        _a(f"moe.{field}", f"{EXPERTS}.{field}", "vllm", without)
        for field, without in (
            ("quant_method", fallback("the expert shapes alone tell the MoE buckets apart")),
            ("top_k", skip("the tile-config changes are not asked: their configs " + LATE)),
            ("hidden_size", fallback("the w2 weight's width")),
            ("global_num_experts", fallback("the w13 weight's count of experts")),
        )
    ),
    _m(
        "moe.exl3",
        "vllm.model_executor.layers.quantization.exl3",
        "vllm",
        skip("the EXL3 MoE runtimes are not prewarmed: their kernels " + LATE),
        fork_only=True,
    ),
)
"""Every declared internal, by area; ``by_name`` finds one."""

OWNED_MODULES = (
    "vllm.v1.worker.",
    "vllm.v1.spec_decode.",
    "vllm.v1.utils",
    "vllm.v1.cudagraph_dispatcher",
    "vllm.v1.sample.logits_processor",
    "vllm.v1.sample.metadata",
)
"""The module prefixes of vLLM's worker-side classes whose state the scratch stage records
and puts back (``runtime.prewarm.stage.runner_state``)."""

LOGGER = "vllm.b12x_launch"
"""The worker's logger, under vLLM's so that its handler prints it."""

OTHER_PATCHES: tuple[tuple[str, Patch], ...] = (
    (
        "triton.runtime.jit.JITFunction.run (per kernel instance)",
        Patch(
            "launcher.runtime.run_chain",
            "one chain of layers (jit_watch's launch count, parallel_compile's and "
            "sampler_ahead's compile-only launches); each layer comes off alone, and the "
            "last one's removal puts back the run that was there before the first",
        ),
    ),
)
"""Patches the stage makes outside vLLM (Triton's); listed so every rebinding has its
restore in one place. The release table does not cover them (they are not vLLM's)."""


_BY_NAME = {e.name: e for e in DECLARED}


def by_name(name: str) -> Internal:
    return _BY_NAME[name]


@dataclass(frozen=True)
class Missing:
    """A declared internal this vLLM lacks, and why: falsy, so ``if found:`` reads well."""

    entry: Internal
    why: str

    def __bool__(self) -> bool:
        return False

    def __str__(self) -> str:
        return f"{self.entry.name} missing ({self.why}): {self.entry.without.says}"


def resolve(entry: Internal | str, on: Any = None) -> Any:
    """The entry's object, or ``Missing``. With ``on``, the member is read on that instance
    (a worker's ``peak_activation_memory``, a config's field); without it, the module is
    imported and the path walked."""
    entry = by_name(entry) if isinstance(entry, str) else entry
    if entry.kind == "assigned" and on is None:  # no module-level name to import
        raise TypeError(f"{entry.name} is set on a live object: read it with read_on")
    if on is not None:
        member = (entry.path or "").rpartition(".")[2]
        try:
            return getattr(on, member)
        except AttributeError:
            return Missing(entry, f"{type(on).__name__} has no {member}")
    try:
        obj: Any = importlib.import_module(entry.module)
    except Exception as exc:  # absent in this line, or fails to import here (no GPU)
        return Missing(entry, f"{entry.module} does not import: {type(exc).__name__}")
    for part in (entry.path or "").split(".") if entry.path else ():
        try:
            obj = getattr(obj, part)
        except AttributeError:
            return Missing(entry, f"{entry.module} has no {entry.path}")
    return obj


def read_on(entry: Internal | str, on: Any, otherwise: Any = None) -> Any:
    """``on``'s member of the declared ``entry``, or ``otherwise`` where ``on`` is None or
    lacks it: what ``otherwise`` stands for is the entry's ``without``, which the check
    before the weights logs where the release lacks it. (``resolve`` with no ``on`` imports
    the module instead, never what a read on a live object means.)"""
    if on is None:
        return otherwise
    found = resolve(entry, on=on)
    return otherwise if isinstance(found, Missing) else found


class InternalMissing(RuntimeError):
    """A declared internal used where the check before the weights said it was missing."""


def resolve_first(group: str) -> Any:
    """The first present entry of ``group``; ``InternalMissing`` naming each when none is
    (the check before the weights has then logged the downgrade the caller's part costs)."""
    missing = []
    for entry in DECLARED:
        if entry.group == group:
            found = resolve(entry)
            if not isinstance(found, Missing):
                return found
            missing.append(str(found))
    raise InternalMissing("; ".join(missing))


def module_path(entry: Internal | str) -> str:
    """``module:path`` of a declared entry, for the runtime's lookups by path."""
    return (by_name(entry) if isinstance(entry, str) else entry).where


def module_of(entry: Internal | str) -> str:
    """The module a declared entry lives in."""
    return (by_name(entry) if isinstance(entry, str) else entry).module


def holder_path(entry: Internal | str) -> str:
    """``module:Class`` of a declared ``Class.member`` entry (the class a patch rebinds on)."""
    return module_path(entry).rpartition(".")[0]


def group_paths(group: str) -> tuple[str, ...]:
    """``module:path`` of each entry of ``group``, in the declared order (tried in turn)."""
    return tuple(e.where for e in DECLARED if e.group == group)
