"""The flags the launcher writes on vLLM's command line: one row per flag, in argv order.

Each row names the flag, the profile key a rejection of it is reported on, how its value is
rendered and where the value comes from. ``launch/vllm_args.build_command`` emits the rows;
``FLAG_KEYS`` (flag -> key, for vLLM's refusals) and what ``vllm.extra_args`` must not set
(``extra_args.planned_dests``: each row's option as vLLM's parser names it) are derived from
them, so the directions cannot drift.
The table lives in the profile room because the profile checks read it; the figures the
deployment and the plan add reach it as plain values in ``FlagValues``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from launcher.profile.schema import Profile

GPU_WORKER = "launcher.worker.PlannedWorker"
CPU_WORKER = "launcher.worker.PlannedCPUWorker"
PLANNED_WORKERS = (GPU_WORKER, CPU_WORKER)
"""vLLM's ``--worker-cls`` paths of the planned workers (a public path: keep it working)."""


@dataclass(frozen=True)
class FlagValues:
    """What the rows read: the profile, and the figures the deployment and the plan derived."""

    profile: Profile
    block_size: int
    capture_sizes: tuple[int, ...]
    gpu_memory_utilization: float
    kv_cache_bytes: int | None
    """``--kv-cache-memory-bytes``, when the plan pins it (``vllm_args.vllm_kv_bytes``)."""


Form = Literal["value", "switch", "toggle", "json"]
"""value: ``FLAG str(v)``; switch: ``FLAG`` when true; toggle: ``FLAG`` or its ``--no-`` form;
json: ``FLAG`` and compact JSON. A value of ``None`` (or a false switch) writes nothing."""


@dataclass(frozen=True)
class PlannedFlag:
    flag: str
    key: str
    """The profile key (or section) the flag comes from: where a refusal of it is reported."""
    form: Form
    value: Callable[[FlagValues], Any]
    aliases: tuple[str, ...] = ()
    """vLLM's short spellings of the flag (``-tp``), refused in ``vllm.extra_args`` too."""

    @property
    def spellings(self) -> tuple[str, ...]:
        negative = ("--no-" + self.flag[2:],) if self.form == "toggle" else ()
        return (self.flag, *negative, *self.aliases)

    def render(self, v: FlagValues) -> list[str]:
        value = self.value(v)
        if self.form == "switch":
            return [self.flag] if value else []
        if self.form == "toggle":
            return [self.flag if value else "--no-" + self.flag[2:]]
        if value is None:
            return []
        if self.form == "json":
            return [self.flag, json.dumps(value, separators=(",", ":"))]
        return [self.flag, str(value)]


MAX_LOGPROBS_DEFAULT = 20
"""vLLM's ``--max-logprobs`` default (``ModelConfig.max_logprobs``, 0.26-0.33)."""


REFUSE_MIDDLEWARE = "launcher.launch.refusals.RefusePromptLogprobs"
"""The API server's middleware that answers prompt-logprob requests HTTP 400, where the profile
refuses them (``launcher.launch.refusals``; imported by vLLM's API server, never here)."""


def _unless_default(value: Any, default: Any) -> Any:
    """Written only where it differs from vLLM's default (the argv of every profile that
    keeps the default stays as it was)."""
    return None if value == default else value


def _dcp(v: FlagValues) -> bool:
    return v.profile.parallel.decode_context > 1


def _ray(v: FlagValues) -> bool:
    return v.profile.runtime.multinode == "ray"


def spans_nodes(profile: Profile) -> bool:
    """One model over several nodes with vLLM's multiprocess launch (not Ray)."""
    return profile.hardware.nodes > 1 and profile.runtime.multinode == "mp"


def _mp_nodes(v: FlagValues, value: Any) -> Any:
    """``value`` on vLLM's one-process-per-node launch over several nodes, else nothing."""
    return value if spans_nodes(v.profile) else None


def _on_gpu(v: FlagValues, value: Any) -> Any:
    return None if v.profile.hardware.gpu == "cpu" else value


def _compilation(v: FlagValues) -> dict[str, Any]:
    mode = v.profile.serving.cudagraph_mode
    if mode == "NONE":
        return {"cudagraph_mode": mode}
    return {"cudagraph_mode": mode, "cudagraph_capture_sizes": list(v.capture_sizes)}


def _speculative(v: FlagValues) -> dict[str, Any] | None:
    p = v.profile
    if not p.mtp_tokens:
        return None
    return {"method": p.speculative.method, "num_speculative_tokens": p.mtp_tokens}


def worker_class(profile: Profile) -> str:
    if profile.vllm.worker_cls != "auto":
        return profile.vllm.worker_cls
    return CPU_WORKER if profile.hardware.gpu == "cpu" else GPU_WORKER


FLAGS: tuple[PlannedFlag, ...] = (
    PlannedFlag("--host", "serving.host", "value", lambda v: v.profile.serving.host),
    PlannedFlag("--port", "serving.port", "value", lambda v: v.profile.serving.port),
    PlannedFlag(
        "--served-model-name",
        "model.served_name",
        "value",
        lambda v: v.profile.model.served_name or None,
    ),
    PlannedFlag(
        "--tensor-parallel-size",
        "parallel.tensor",
        "value",
        lambda v: v.profile.parallel.tensor,
        ("-tp",),
    ),
    PlannedFlag(
        "--pipeline-parallel-size",
        "parallel.pipeline",
        "value",
        lambda v: v.profile.parallel.pipeline if v.profile.parallel.pipeline > 1 else None,
        ("-pp",),
    ),
    PlannedFlag(
        "--decode-context-parallel-size",
        "parallel.decode_context",
        "value",
        lambda v: v.profile.parallel.decode_context if _dcp(v) else None,
        ("-dcp",),
    ),
    PlannedFlag(
        "--cp-kv-cache-interleave-size",
        "parallel.interleave",
        "value",
        lambda v: v.profile.parallel.interleave if _dcp(v) else None,
    ),
    PlannedFlag(
        "--dcp-comm-backend",
        "parallel.dcp_comm_backend",
        "value",
        lambda v: (v.profile.parallel.dcp_comm_backend or None) if _dcp(v) else None,
    ),
    PlannedFlag(
        "--enable-expert-parallel",
        "parallel.expert",
        "switch",
        lambda v: v.profile.parallel.expert,
    ),
    PlannedFlag(
        "--distributed-executor-backend",
        "runtime.multinode",
        "value",
        lambda v: "ray" if v.profile.hardware.nodes > 1 and _ray(v) else None,
    ),
    PlannedFlag(
        "--nnodes", "hardware.nodes", "value", lambda v: _mp_nodes(v, v.profile.hardware.nodes)
    ),
    PlannedFlag(
        "--node-rank",
        "runtime.node_rank",
        "value",
        lambda v: _mp_nodes(v, v.profile.runtime.node_rank),
    ),
    PlannedFlag(
        "--master-addr",
        "runtime.master_addr",
        "value",
        lambda v: _mp_nodes(v, v.profile.runtime.master_addr),
    ),
    PlannedFlag(
        "--master-port",
        "runtime.master_port",
        "value",
        lambda v: _mp_nodes(v, v.profile.runtime.master_port),
    ),
    PlannedFlag(  # the nodes after the first serve no API
        "--headless",
        "runtime.node_rank",
        "switch",
        lambda v: _mp_nodes(v, v.profile.runtime.node_rank > 0),
    ),
    PlannedFlag(
        "--quantization",
        "model.quantization",
        "value",
        lambda v: v.profile.model.quantization or None,
        ("-q",),
    ),
    PlannedFlag("--dtype", "model.dtype", "value", lambda v: v.profile.model.dtype),
    PlannedFlag(
        "--attention-backend",
        "vllm.attention_backend",
        "value",
        lambda v: v.profile.vllm.attention_backend or None,
    ),
    PlannedFlag(
        "--kv-cache-dtype",
        "serving.kv_cache_dtype",
        "value",
        lambda v: v.profile.serving.kv_cache_dtype,
    ),
    PlannedFlag("--block-size", "serving.block_size", "value", lambda v: v.block_size),
    PlannedFlag(
        "--max-model-len",
        "serving.max_model_len",
        "value",
        lambda v: v.profile.serving.max_model_len,
    ),
    PlannedFlag(
        "--max-num-seqs",
        "serving.max_num_seqs",
        "value",
        lambda v: v.profile.serving.max_num_seqs,
    ),
    PlannedFlag(
        "--max-num-batched-tokens",
        "serving.max_num_batched_tokens",
        "value",
        lambda v: v.profile.serving.max_num_batched_tokens,
    ),
    PlannedFlag(
        "--max-logprobs",
        "serving.max_logprobs",
        "value",
        lambda v: _unless_default(v.profile.serving.max_logprobs, MAX_LOGPROBS_DEFAULT),
    ),
    PlannedFlag(
        "--enable-chunked-prefill",
        "serving.enable_chunked_prefill",
        "toggle",
        lambda v: v.profile.serving.enable_chunked_prefill,
    ),
    PlannedFlag(
        "--enable-prefix-caching",
        "serving.enable_prefix_caching",
        "toggle",
        lambda v: v.profile.serving.enable_prefix_caching,
    ),
    PlannedFlag(
        "--compilation-config",
        "serving.cudagraph_capture_sizes",
        "json",
        lambda v: _on_gpu(v, _compilation(v)),
    ),
    PlannedFlag("--speculative-config", "speculative", "json", _speculative),
    PlannedFlag("--worker-cls", "vllm.worker_cls", "value", lambda v: worker_class(v.profile)),
    PlannedFlag(  # vLLM's own watch for compiles after its warmup
        "--jit-monitor-mode",
        "prewarm.strict_jit",
        "value",
        lambda v: _on_gpu(v, "error" if v.profile.prewarm.strict_jit else "warn"),
    ),
    PlannedFlag(  # no key of its own: the plan's figures for every rank set it
        "--gpu-memory-utilization",
        "memory",
        "value",
        lambda v: _on_gpu(v, f"{v.gpu_memory_utilization:.3f}"),
    ),
    PlannedFlag(
        "--kv-cache-memory-bytes",
        "memory.kv_cache_bytes",
        "value",
        lambda v: v.kv_cache_bytes,
    ),
    PlannedFlag(
        "--middleware",
        "serving.prompt_logprobs",
        "value",
        lambda v: REFUSE_MIDDLEWARE if v.profile.serving.prompt_logprobs == "refuse" else None,
    ),
    PlannedFlag(
        "--trust-remote-code",
        "model.trust_remote_code",
        "switch",
        lambda v: v.profile.model.trust_remote_code,
    ),
)
"""Every flag the launcher writes, in the order it writes them (the argv is compared byte for
byte with ``tests/golden``)."""


def render(v: FlagValues) -> list[str]:
    return [arg for row in FLAGS for arg in row.render(v)]


FLAG_KEYS: dict[str, str] = {s: row.key for row in FLAGS for s in row.spellings}
"""Flag (any spelling) -> the profile key it comes from, so a flag vLLM rejects names its key."""
