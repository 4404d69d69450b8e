"""A throwaway KV cache before sizing, built and torn down through vLLM's own path.

Sparse MLA with the DSA indexer runs kernels that exist only once a KV cache does: attention
groups, metadata builders, the indexer's caches, JIT-registry entries the builders add. Before
``determine_available_memory`` none of that exists, so a warmup called there does nothing.
vLLM 0.26 already builds such a cache for its CUDA-graph memory profiling
(``GPUModelRunner._init_minimal_kv_cache_for_profiling`` / ``_cleanup_profiling_kv_cache``);
:func:`scratch_kv` does the same with as many blocks as the serving shapes need, keeps the
runner eager while it exists (no graph is captured here: vLLM captures after sizing), and on
the way out releases it exactly as vLLM does, puts the runner's own state back as it was before
the stage (``runner_state``: buffers the served steps wrote, objects ``initialize_kv_cache``
made), then checks that nothing stayed behind.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from launcher.contract.record import Restored
from launcher.vllm.internals import read_on


class ScratchUnsupported(RuntimeError):
    """The runner has no minimal-KV path (vLLM's V2 model runner, an older vLLM)."""


class ScratchNotRestored(RuntimeError):
    """After the release the runner still holds scratch state: vLLM's sizing would be wrong."""


@dataclass
class ScratchKv:
    blocks: int
    """KV blocks per rank the scratch cache holds (vLLM's block, every layer)."""
    bytes: int
    """Device bytes its tensors took."""
    kv_cache_config: Any
    """The ``KVCacheConfig`` it was built from (a scheduler over it sees the same blocks)."""
    forced: list[str] = field(default_factory=list)
    """What the release had to remove by hand (requests a failed step left in the batch)."""
    account: str = ""
    """What was served on it (waves, steps, tokens)."""
    restored: Restored | None = None
    """What ``runner_state`` found changed after the release and put back."""
    stray: list[str] = field(default_factory=list)
    """Work the stage started that outlived it and was ended: captured graphs dropped,
    threads joined (none, when the stage keeps to its rules)."""
    serving_peak: int = 0
    """What the served waves took from torch's allocator above what they left (the larger
    of ``Transient``'s two figures): the deployment's own request shapes (a prompt reaching
    the context among them), which vLLM's profile batch, a prompt with no context, does not
    run."""


_ABSENT = object()
"""What a declared read gives where the runner lacks the attribute (None is a value there)."""


def _holds_kv_config(runner: Any) -> bool:
    """Whether the runner holds a ``KVCacheConfig`` (set by ``initialize_kv_cache``)."""
    return read_on("scratch.kv_cache_config", runner, _ABSENT) is not _ABSENT


def unsupported(runner: Any) -> str | None:
    """Why ``runner`` cannot build a scratch KV cache, or None when it can."""
    entries = ("scratch.initialize_kv_cache", "scratch.get_kv_cache_spec")
    missing = [e.rpartition(".")[2] for e in entries if read_on(e, runner) is None]
    if missing:
        return f"{type(runner).__name__} has no {', '.join(missing)} (vLLM's model runners have)"
    return None


def profiling_path(runner: Any) -> bool:
    """vLLM's V1 model runner: it builds and releases a minimal KV cache of its own before
    sizing (``_init_minimal_kv_cache_for_profiling`` / ``_cleanup_profiling_kv_cache``). The V2
    runner has neither: its scratch cache is built by ``initialize_kv_cache`` and released by
    putting the runner and the layers' bindings back as they were."""
    entries = ("scratch.cleanup", "scratch.minimal_cache")
    return all(read_on(e, runner) is not None for e in entries)


def _config(runner: Any, blocks: int) -> Any:
    """A ``KVCacheConfig`` of ``blocks`` blocks, made as vLLM makes its minimal one."""
    from launcher.vllm.internals import resolve_first

    get_kv_cache_groups = resolve_first("kv_groups")  # kv_cache_planning from vLLM 0.33
    get_kv_cache_config_from_groups = resolve_first("kv_config_from_groups")
    spec = read_on("scratch.get_kv_cache_spec", runner)()  # ``unsupported`` checked it
    groups = get_kv_cache_groups(runner.vllm_config, spec)
    cache_config = runner.cache_config
    saved = cache_config.num_gpu_blocks_override
    cache_config.num_gpu_blocks_override = blocks
    try:
        return get_kv_cache_config_from_groups(runner.vllm_config, groups, available_memory=0)
    finally:
        cache_config.num_gpu_blocks_override = saved


def _dispatchers(runner: Any) -> list[Any]:
    """The runner's CUDA-graph dispatchers (its own and its drafter's)."""
    drafter = read_on("runner.drafter", runner)
    found = [
        read_on("scratch.dispatcher", runner),
        read_on("drafter.dispatcher", drafter),
    ]
    return [d for d in found if d is not None and hasattr(d, "keys_initialized")]


def _inference_mode() -> contextlib.AbstractContextManager[Any]:
    """torch's inference mode, as vLLM's ``execute_model`` runs (nothing without torch)."""
    try:
        import torch
    except ImportError:  # the unit tier's stand-ins
        return contextlib.nullcontext()
    return torch.inference_mode()


def _drop_requests(runner: Any) -> list[str]:
    """Remove the requests still in the runner's batch; what was removed.

    The last wave's finished requests are among them: the scheduler tells the runner of a
    finished request in its next step's output, and the stage takes no step after its last.
    vLLM removes requests inside ``execute_model``, under inference mode; its batch's buffers
    made there (the ``allowed_token_ids`` mask) refuse an in-place write outside it (the
    H100 stopped the boot so, 2026-12-06, when the last wave served ``allowed_token_ids``).
    """
    requests = read_on("scratch.requests", runner) or {}
    batch = read_on("scratch.input_batch", runner)
    left = list(requests)
    with _inference_mode():
        for req_id in left:
            remove = read_on("scratch.remove_request", batch)
            if remove is not None:
                remove(req_id)
            requests.pop(req_id, None)
        condense = read_on("scratch.condense", batch)
        if left and condense is not None:
            condense()
    if read_on("scratch.draft_token_ids", runner, _ABSENT) is not _ABSENT:
        runner._draft_token_ids = None
    # A removed request leaves its row of block ids behind; vLLM's own dummy batches (its
    # CUDA-graph profiling on a cache of a few blocks) read those rows: back to zeros, as
    # a runner that never served holds them (stale ids were an illegal address on the H200).
    tables = read_on("scratch.block_table", batch)
    if tables is not None and hasattr(tables, "clear"):
        tables.clear()
    return [f"request {r}" for r in left]


def leftovers(runner: Any) -> list[str]:
    """What scratch state the runner still holds (empty when restored)."""
    out = []
    if read_on("scratch.requests", runner):
        out.append(f"{len(runner.requests)} requests")
    batch = read_on("scratch.input_batch", runner)
    if read_on("scratch.num_reqs", batch, 0):
        out.append(f"{batch.num_reqs} rows in the input batch")
    if read_on("scratch.kv_caches", runner):
        out.append("kv_caches")
    if read_on("scratch.attn_groups", runner):
        out.append("attention groups")
    if _holds_kv_config(runner):
        out.append("kv_cache_config")
    if read_on("scratch.num_gpu_blocks", runner.cache_config) is not None:
        out.append("cache_config.num_gpu_blocks")
    return out


def _threads() -> set[int]:
    import threading

    return {t.ident for t in threading.enumerate() if t.ident is not None}


def _captured() -> int:
    """CUDA graphs vLLM's wrappers hold (0 before vLLM's own capture phase)."""
    try:
        from vllm.compilation.cuda_graph import CUDAGraphWrapper
    except ImportError:
        return 0
    return sum(len(w.concrete_cudagraph_entries) for w in list(CUDAGraphWrapper._all_instances))


LIFELONG_THREADS = {("tqdm._monitor", "TMonitor")}
"""Threads a library starts once and keeps for the process, which run none of the stage's
work: tqdm's monitor wakes every 10 s to redraw bars and ends only when the last bar closes.
Joined, it held a warm boot's stage release for the whole 5 s (H200, 2026-12-04)."""


def _lifelong(thread: Any) -> bool:
    return (type(thread).__module__, type(thread).__qualname__) in LIFELONG_THREADS


def _end_stray_work(threads_before: set[int], graphs_before: int, join_s: float = 5.0) -> list[str]:
    """End what the stage started and left running: threads (compile workers) are joined,
    graphs captured on the scratch cache's memory dropped (a replay would read freed memory).
    A library's lifelong monitor thread (``LIFELONG_THREADS``) is left to run."""
    import threading

    out = []
    for t in threading.enumerate():
        if t.ident not in threads_before and t is not threading.current_thread():
            if _lifelong(t):
                continue
            t.join(timeout=join_s)
            if t.is_alive():
                out.append(f"thread {t.name} still running after {join_s:.0f} s")
    if _captured() > graphs_before:
        from vllm.compilation.cuda_graph import CUDAGraphWrapper

        out.append(
            f"{_captured() - graphs_before} CUDA graphs captured on the scratch cache, dropped"
        )
        CUDAGraphWrapper.clear_all_graphs()
    return out


@dataclass
class Transient:
    """What a block of served steps took from torch's allocator above what it left."""

    peak: int = 0
    """The allocated peak above what the block left allocated."""
    segments: int = 0
    """The segments the allocator grew by, from an empty cache, less what the block left
    allocated: fragmentation included, as serving's first requests take them after vLLM
    empties the cache."""


@contextlib.contextmanager
def transient_peak(device: Any) -> Iterator[Transient]:
    """Yields a ``Transient`` filled in after the block (zeros without a CUDA device)."""
    out = Transient()
    try:
        import torch
    except ImportError:
        yield out
        return
    if not torch.cuda.is_available() or device is None:
        yield out
        return
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    allocated, reserved = torch.cuda.memory_allocated(device), torch.cuda.memory_reserved(device)
    try:
        yield out
    finally:
        torch.cuda.synchronize(device)
        left = torch.cuda.memory_allocated(device)
        out.peak = max(0, int(torch.cuda.max_memory_allocated(device) - left))
        grown = torch.cuda.max_memory_reserved(device) - reserved
        out.segments = max(0, int(grown - max(0, left - allocated)))


def _allocated(device: Any) -> int:
    try:
        import torch
    except ImportError:  # no torch, no device memory to count (the unit tier's stand-ins)
        return 0
    return int(torch.cuda.memory_allocated(device)) if torch.cuda.is_available() else 0


@contextlib.contextmanager
def scratch_kv(
    runner: Any,
    blocks: int,
    make_config: Callable[[Any, int], Any] | None = None,
    owned: Callable[[Any], bool] | None = None,
) -> Iterator[ScratchKv]:
    """A real KV cache of ``blocks`` blocks on ``runner`` while the block runs, eager.

    ``make_config`` builds the ``KVCacheConfig`` (default: vLLM's own functions, as its
    minimal profiling cache is built); ``owned`` says which objects reached from the runner
    are its own state (default: vLLM's worker-side classes, ``runner_state.OWNED``).

    Raises:
        ScratchUnsupported: the runner has no minimal-KV path.
        ScratchNotRestored: the release left state that vLLM's own sizing would trip on.
    """
    why = unsupported(runner)
    if why:
        raise ScratchUnsupported(why)
    if read_on("scratch.kv_caches", runner) or _holds_kv_config(runner):
        raise ScratchUnsupported("the runner already holds a KV cache")
    from launcher.runtime.prewarm.stage import runner_state

    v1 = profiling_path(runner)
    config = (make_config or _config)(runner, blocks)
    device = read_on("runner.device", runner)
    layers = _layers(runner)
    try:
        snapshot = runner_state.take(runner, owned)
        bindings = runner_state.bindings(layers)
    except Exception as exc:  # nothing built yet: the boot goes on as plain vLLM would
        raise ScratchUnsupported(
            f"cannot record the runner's state to restore it: {exc!r}"
        ) from exc
    threads, graphs = _threads(), _captured()
    blocks_before = runner.cache_config.num_gpu_blocks
    graph_settings = _graph_settings(runner)
    before = _allocated(device)

    def put_back() -> Any:
        restored = snapshot.restore()
        restored.rebound.extend(bindings.restore(memory))
        runner.cache_config.num_gpu_blocks = blocks_before
        _put_graph_settings(runner, graph_settings)
        return restored

    memory: list[tuple[int, int]] = []
    try:
        initialize = read_on("scratch.initialize_kv_cache", runner)  # ``unsupported`` checked
        if v1:
            initialize(config, is_profiling=True)
        else:
            initialize(config)
            zero = read_on("scratch.kv_zero_meta", runner)
            if read_on("scratch.needs_zeroing", config, False) and zero is not None:
                zero()  # as vLLM's worker does after it
        runner.cache_config.num_gpu_blocks = config.num_blocks
        tensors = _kv_tensors(runner, layers)
        memory = runner_state.storages(tensors)
    except Exception as exc:  # half built: put the runner back, the boot goes on without it
        if v1 and _holds_kv_config(runner):
            read_on("scratch.cleanup", runner)()
        put_back()
        _release_memory()
        raise ScratchUnsupported(f"vLLM's initialize_kv_cache failed: {exc!r}") from exc
    alive = _weak(tensors)
    del tensors
    scratch = ScratchKv(
        blocks=int(config.num_blocks),
        bytes=_allocated(device) - before,
        kv_cache_config=config,
    )
    # initialize_kv_cache readied the graph dispatchers: a step now would capture a graph
    # outside vLLM's capture phase. Eager until the release, as before vLLM's capture.
    dispatchers = _dispatchers(runner)
    for d in dispatchers:
        d.keys_initialized = False
    try:
        yield scratch
    finally:
        scratch.forced = _drop_requests(runner)
        if v1:
            read_on("scratch.cleanup", runner)()  # ``profiling_path``: it is there
        else:
            runner_state.synchronize_device()
        # Whatever the served steps wrote and initialize_kv_cache made on the runner, back as
        # vLLM had it: its own next steps read some of those buffers as they stand.
        scratch.restored = put_back()
        scratch.stray = _end_stray_work(threads, graphs)
        _release_memory()
        held = [r() for r in alive if r() is not None]
        if held:  # still referenced, so not freed: no stale address, only memory kept
            kept = sum(runner_state.nbytes(t) for t in held)
            scratch.stray.append(
                f"{len(held)} scratch KV tensors still referenced after the release "
                f"({kept:,} bytes, measured as kept)"
            )
        del held
        left = leftovers(runner)
        if left:
            raise ScratchNotRestored(
                "the scratch KV cache was released but the runner still holds: " + ", ".join(left)
            )


def _kv_tensors(runner: Any, layers: dict[str, Any]) -> list[Any]:
    """The scratch cache's tensors: the runner's and each attention layer's binding."""
    from launcher.runtime.prewarm.stage import runner_state

    bound = [read_on("attention.kv_cache", x) for x in layers.values()]
    return runner_state.tensors_in([read_on("scratch.kv_caches", runner), bound])


def _weak(tensors: list[Any]) -> list[Any]:
    import weakref

    out = []
    for t in tensors:
        try:
            out.append(weakref.ref(t))
        except TypeError:  # not weak-referenceable: not checked
            continue
    return out


GRAPH_SETTINGS = ("cudagraph_mode", "cudagraph_capture_sizes", "max_cudagraph_capture_size")
"""What the V2 runner's ``initialize_kv_cache`` resolves on vLLM's compilation config from the
attention backends (the V1 runner does it on its profiling cache too): put back, so vLLM's own
profile sees the settings it would have seen."""


def _compilation_config(runner: Any) -> Any:
    """vLLM's compilation config the runner holds (None: a runner without one)."""
    return read_on("config.compilation_config", read_on("runner.vllm_config", runner))


def _graph_settings(runner: Any) -> dict[str, Any]:
    import copy

    config = _compilation_config(runner)
    return {n: copy.copy(getattr(config, n)) for n in GRAPH_SETTINGS if hasattr(config, n)}


def _put_graph_settings(runner: Any, saved: dict[str, Any]) -> None:
    config = _compilation_config(runner)
    for name, value in saved.items():
        setattr(config, name, value)


def _layers(runner: Any) -> dict[str, Any]:
    """vLLM's attention layers by name (``static_forward_context``), or none."""
    return dict(read_on("compile.static_forward_context", _compilation_config(runner)) or {})


def _release_memory() -> None:
    """Free what the released cache held (vLLM's own cleanup does the same)."""
    import gc

    gc.collect()
    try:
        import torch
    except ImportError:
        return
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
