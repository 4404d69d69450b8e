"""Coupling rules between profile keys, checked before anything starts.

Each rule returns ``(key, message)`` pairs; the message shows every value involved
and ends with what to change. The loader adds file and line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from launcher.profile import settings_checks
from launcher.profile.schema import Profile
from launcher.profile.vllm_asks import asks_of
from launcher.vllm import can_serve, lines
from launcher.vllm.lines import VllmLine, sparse_mla_backends

Rule = Callable[[Profile], Iterator[tuple[str, str]]]

DS_MLA_KV_DTYPES = ("fp8_ds_mla", "nvfp4_ds_mla")


def runtime_of(p: Profile) -> tuple[VllmLine, str]:
    """The vLLM line the profile targets (``vllm.runtime``), and how that was decided."""
    return lines.resolve(p.vllm.runtime, p.vllm.attention_backend)


def uses_sparse_mla(p: Profile) -> bool:
    """Whether the attention backend is the runtime's sparse-MLA backend."""
    return (p.vllm.attention_backend or "") in runtime_of(p)[0].sparse_mla_backends


def default_block_size(p: Profile) -> int:
    """vLLM's block for the profile's backend: 64 for the MLA sparse backends on CUDA."""
    if p.serving.block_size:
        return p.serving.block_size
    if p.hardware.gpu == "cpu":
        return 128
    return 64 if uses_sparse_mla(p) else 16


def draft_rows(max_num_seqs: int, mtp_tokens: int) -> int:
    """Token rows of one decode step of every sequence with its drafts: max_num_seqs x
    (1 + MTP) (the largest decode batch, the rejection sampler's rows). The one place it is
    computed: the coupling checks call it on the profile, ``Deployment.draft_rows`` holds it
    for everything past them, and a worker's key ranges call it on vLLM's live counts."""
    return max_num_seqs * (1 + mtp_tokens)


def auto_capture_sizes(p: Profile) -> list[int]:
    """Capture sizes for ``auto``: multiples of 1+MTP up to max_num_seqs x (1+MTP)."""
    step = 1 + p.mtp_tokens
    top = draft_rows(p.serving.max_num_seqs, p.mtp_tokens)
    sizes = [step * n for n in (1, 2, 4)] + list(range(8 * step, top + 1, 8 * step))
    return sorted({s for s in sizes if s <= top} | {top})


def capture_sizes(p: Profile) -> list[int]:
    if p.serving.cudagraph_mode == "NONE":
        return []
    sizes = p.serving.cudagraph_capture_sizes
    return auto_capture_sizes(p) if sizes == "auto" else sorted(sizes)


def _dcp_divides_tp(p: Profile):
    tp, dcp = p.parallel.tensor, p.parallel.decode_context
    if tp % dcp:
        yield (
            "parallel.decode_context",
            f"must divide parallel.tensor (got {dcp}, tensor {tp}); use one of "
            f"{', '.join(str(d) for d in range(1, tp + 1) if tp % d == 0)}",
        )


def _interleave_divides_block(p: Profile):
    block, inter = default_block_size(p), p.parallel.interleave
    if block % inter:
        yield (
            "parallel.interleave",
            f"must divide the KV block (got {inter}, block_size {block}); use a divisor of {block}",
        )


def _indexer_shards_divide_dcp(p: Profile):
    shards, dcp = p.parallel.indexer_cache_shards, p.parallel.decode_context
    if shards is not None and dcp % shards:
        yield (
            "parallel.indexer_cache_shards",
            f"must divide parallel.decode_context (got {shards}, decode_context {dcp}); use one "
            f"of {', '.join(str(d) for d in range(1, dcp + 1) if dcp % d == 0)}",
        )


def _ranks_match_gpus(p: Profile):
    gpus = p.hardware.count * p.hardware.nodes
    if p.world_size != gpus:
        yield (
            "parallel.tensor",
            f"tensor x pipeline must equal the GPUs in hardware (got {p.parallel.tensor} x "
            f"{p.parallel.pipeline} = {p.world_size}, hardware {p.hardware.count} x "
            f"{p.hardware.nodes} node(s) = {gpus}); change parallel.tensor or hardware.count",
        )


def _speculative_tokens(p: Profile):
    s = p.speculative
    if s.method != "none" and s.tokens == 0:
        yield (
            "speculative.tokens",
            f"must be at least 1 with method {s.method}; set tokens or method: none",
        )
    if s.method == "none" and s.tokens:
        yield (
            "speculative.tokens",
            f"is {s.tokens} but method is none; set method: mtp or tokens: 0",
        )


def _captures_multiple_of_step(p: Profile):
    sizes = p.serving.cudagraph_capture_sizes
    step = 1 + p.mtp_tokens
    if sizes == "auto" or step == 1:
        return
    bad = [s for s in sizes if s % step]
    if bad:
        yield (
            "serving.cudagraph_capture_sizes",
            f"must be multiples of 1 + speculative.tokens = {step} (not: {bad}); "
            f"use {sorted({max(step, s - s % step) for s in sizes})} or auto",
        )


def _seqs_fit_captures(p: Profile):
    if p.serving.cudagraph_capture_sizes == "auto":
        return
    sizes = capture_sizes(p)
    if not sizes:
        return
    need = draft_rows(p.serving.max_num_seqs, p.mtp_tokens)
    if need > max(sizes):
        yield (
            "serving.max_num_seqs",
            f"max_num_seqs x (1 + speculative.tokens) = {p.serving.max_num_seqs} x "
            f"{1 + p.mtp_tokens} = {need} exceeds the largest capture size {max(sizes)}; "
            f"add {need} to serving.cudagraph_capture_sizes or lower max_num_seqs to "
            f"{max(sizes) // (1 + p.mtp_tokens)}",
        )


def _batched_tokens(p: Profile):
    s = p.serving
    need = draft_rows(s.max_num_seqs, p.mtp_tokens)
    if s.max_num_batched_tokens < need:
        yield (
            "serving.max_num_batched_tokens",
            f"must hold one step of every sequence: max_num_seqs x (1 + speculative.tokens) = "
            f"{need} (got {s.max_num_batched_tokens}); raise it to at least {need}",
        )
    if not s.enable_chunked_prefill and s.max_num_batched_tokens < s.max_model_len:
        yield (
            "serving.max_num_batched_tokens",
            f"without chunked prefill it must be at least max_model_len ({s.max_model_len}, "
            f"got {s.max_num_batched_tokens}); enable chunked prefill or raise it",
        )


def _one_kv_pin(p: Profile):
    m = p.memory
    if m.kv_tokens is not None and m.kv_cache_bytes is not None:
        yield (
            "memory.kv_tokens",
            f"a pinned KV size (kv_tokens {m.kv_tokens}) and a KV-bytes budget (kv_cache_bytes "
            f"{m.kv_cache_bytes}) are both set; keep one",
        )


def _kv_dtype_suits_backend(p: Profile):
    dtype, backend = p.serving.kv_cache_dtype, p.vllm.attention_backend
    sparse = sparse_mla_backends()
    if dtype in DS_MLA_KV_DTYPES and backend not in sparse:
        yield (
            "serving.kv_cache_dtype",
            f"{dtype} needs an MLA sparse attention backend (vllm.attention_backend is "
            f"{backend}); set vllm.attention_backend to {' or '.join(sparse)}",
        )


def _runtime_offers(p: Profile):
    """A profile that names its line may only ask for what that line has."""
    if p.vllm.runtime == "auto":
        return
    yield from can_serve.on_named_line(asks_of(p), runtime_of(p)[0])


def _launcher_env_prefix(p: Profile):
    for key in p.env:
        if not key or not key.replace("_", "").isalnum() or key[0].isdigit():
            yield (f"env.{key}", "is not a valid environment variable name")


def _cpu_is_single_rank(p: Profile):
    if p.hardware.gpu == "cpu" and p.parallel.decode_context > 1:
        yield ("parallel.decode_context", "decode context parallel needs GPUs; set it to 1 on cpu")


def _multinode(p: Profile):
    r, nodes = p.runtime, p.hardware.nodes
    if nodes > 1 and r.multinode == "mp" and not r.master_addr:
        yield (
            "runtime.master_addr",
            f"{nodes} nodes with multinode mp need node 0's address; "
            "set runtime.master_addr (or multinode: ray)",
        )
    if r.node_rank >= nodes:
        yield ("runtime.node_rank", f"must be below hardware.nodes ({nodes}), got {r.node_rank}")


def _qualify_fits_model_len(p: Profile):
    q, mml = p.qualify, p.serving.max_model_len
    if q.output_tokens is not None and q.output_tokens >= mml:
        yield (
            "qualify.output_tokens",
            f"{q.output_tokens:,} leaves no prompt within serving.max_model_len {mml:,}; "
            f"use at most {mml - 1}",
        )
        return
    if q.prompt_tokens is None:
        return
    out = q.output_tokens or 1
    if q.prompt_tokens + out > mml:
        yield (
            "qualify.prompt_tokens",
            f"{q.prompt_tokens:,} prompt + {out:,} output tokens exceed serving.max_model_len "
            f"{mml:,}; use at most {max(1, mml - out)}",
        )


RULES: tuple[Rule, ...] = (
    _multinode,
    _ranks_match_gpus,
    _dcp_divides_tp,
    _indexer_shards_divide_dcp,
    _interleave_divides_block,
    _speculative_tokens,
    _captures_multiple_of_step,
    _seqs_fit_captures,
    _batched_tokens,
    _one_kv_pin,
    _kv_dtype_suits_backend,
    _runtime_offers,
    _launcher_env_prefix,
    _cpu_is_single_rank,
    _qualify_fits_model_len,
    *settings_checks.REFUSALS,
)


def check_rules(p: Profile, force: bool = False) -> list[tuple[str, str]]:
    """Every coupling-rule violation of ``p`` as ``(dotted key, message)``; ``force`` lets
    through what ``--force`` may (``settings_checks.FORCEABLE``)."""
    skip = settings_checks.FORCEABLE if force else ()
    return [issue for rule in RULES if rule not in skip for issue in rule(p)]


COMPILE_KEY_PREFIXES = ("B12X_", "CUTE_", "CUTLASS_")
"""b12x puts every variable with these prefixes into its compile-cache key (b12x 1.5.1
``_lib/compiler.py``), apart from its operational ones below."""
COMPILE_KEY_EXEMPT = frozenset(
    {
        "B12X_AUTOTUNE",
        "B12X_AUTOTUNE_EXHAUSTIVE",
        "B12X_TUNING_CACHE_VERSION",
        "B12X_COMPILE_CACHE_DIR",
        "B12X_COMPILE_DISK_CACHE",
        "B12X_COMPILE_MEMORY_CACHE",
        "B12X_COMPILE_MEMORY_CACHE_SIZE",
        "B12X_COMPILE_SPEC_MEMO",
        "B12X_LOG_CUTE_COMPILES",
        "B12X_LOG_CUTE_COMPILES_AFTER_ENGINE_START",
        "B12X_LOG_CUTE_COMPILE_ARGS",
        "B12X_LOG_CUTE_COMPILE_STACK",
        "B12X_LOG_CUTE_COMPILE_STACK_DEPTH",
        "B12X_PRINT_COMPILE_PROGRESS",
        "B12X_PREPARATION_TRACE_DIR",
        "B12X_TIMING",
        "B12X_TIMING_THRESHOLD_MS",
        "CUTE_DSL_CACHE_DIR",
        # keyed on purpose (it selects the code compiled), and the same for prewarm and serving
        "CUTE_DSL_ARCH",
    }
)
"""b12x's operational variables (not in its key), and CUTE_DSL_ARCH (in it on purpose)."""


def check_warnings(p: Profile) -> list[tuple[str, str]]:
    """What is allowed but probably a mistake, as ``(dotted key, message)``."""
    out = [w for check in settings_checks.WARNINGS for w in check(p)]
    for key, value in p.env.items():
        if key.startswith(COMPILE_KEY_PREFIXES) and key not in COMPILE_KEY_EXEMPT:
            out.append(
                (
                    f"env.{key}",
                    f"b12x puts {key} into its compile-cache key: every kernel compiled without "
                    f"{key}={value} (an earlier prewarm or boot) compiles again, and so does "
                    "every kernel again when it changes; remove it unless the kernels need it",
                )
            )
    return out
