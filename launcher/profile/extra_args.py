"""What ``vllm.extra_args`` may say: each item resolved once, as vLLM's parser reads it.

The plan is only true of the command it prints. An extra argument that sets an option the
launcher writes (``--max-model`` is ``--max-model-len``; vLLM keeps the last), one that changes
what the plan sized without the launcher writing it (``--num-gpu-blocks-override``, ``-O0``,
``--enforce-eager``), and ``--config FILE`` (more options from a file the plan never sees) are
refused unless ``--force``, which lets them through and prints each as a warning. A secret on
the command line (``--api-ke sk-...``: every process list shows it) is refused, ``--force`` or
not, as is what vLLM's parser would stop on (an ambiguous abbreviation, a missing value, a
word that is no option's value). ``launcher.vllm.options.resolve`` reads the items; the checks
here only classify its answer, against the shipped table for the dry run and against the
installed vLLM's parser at launch (``issues(..., table)``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from launcher.profile.schema import Profile
from launcher.profile.vllm_flags import FLAGS
from launcher.secrets import SECRET_VARIABLES, secret_item, secret_value
from launcher.vllm.options import Item, OptionTable, Resolution, load_table, resolve

SIZED: dict[str, tuple[str, str]] = {
    "num_gpu_blocks_override": ("memory.kv_tokens", "it sets the KV cache's block count"),
    "optimization_level": ("serving.cudagraph_mode", "it sets what compiles and is captured"),
    "enforce_eager": ("serving.cudagraph_mode", "it turns CUDA graphs off"),
    "cudagraph_capture_sizes": ("serving.cudagraph_capture_sizes", "it sets the captured sizes"),
    "max_cudagraph_capture_size": ("serving.cudagraph_capture_sizes", "it caps the captures"),
    "spec_method": ("speculative", "it sets the speculative decoding"),
    "spec_model": ("speculative", "it sets the draft model"),
    "spec_tokens": ("speculative.tokens", "it sets the draft tokens"),
    "attention_config": ("vllm.attention_backend", "it sets the attention backend"),
    "dcp_kv_cache_interleave_size": ("parallel.interleave", "it sets the DCP interleave"),
    "hf_overrides": ("model.path", "it changes the model's config the plan read"),
    "hf_config_path": ("model.path", "it reads another config than the plan did"),
    "revision": ("model.path", "it loads another revision of the checkpoint"),
    "quantization_config": ("model.quantization", "it changes the quantization"),
    "model_impl": ("model.path", "another implementation of the model"),
    "kv_cache_dtype_skip_layers": ("serving.kv_cache_dtype", "it changes the KV dtype per layer"),
    "kv_offloading_size": ("memory", "it offloads the KV cache"),
    "kv_offloading_backend": ("memory", "it offloads the KV cache"),
    "kv_transfer_config": ("memory", "it adds a KV connector and its buffers"),
    "disable_hybrid_kv_cache_manager": ("serving.block_size", "it changes the KV cache's layout"),
    "cpu_offload_gb": ("model.weights_per_rank", "it offloads weights to the CPU"),
    "cpu_offload_params": ("model.weights_per_rank", "it offloads weights to the CPU"),
    "offload_backend": ("model.weights_per_rank", "it offloads weights"),
    "offload_group_size": ("model.weights_per_rank", "it offloads weights"),
    "offload_num_in_group": ("model.weights_per_rank", "it offloads weights"),
    "offload_prefetch_step": ("model.weights_per_rank", "it offloads weights"),
    "offload_params": ("model.weights_per_rank", "it offloads weights"),
    "data_parallel_size": ("parallel", "data parallelism runs more ranks than the plan has"),
    "data_parallel_size_local": ("parallel", "data parallelism runs more ranks than planned"),
    "data_parallel_rank": ("parallel", "data parallelism runs more ranks than planned"),
    "data_parallel_start_rank": ("parallel", "data parallelism runs more ranks than planned"),
    "prefill_context_parallel_size": ("parallel", "it shards the KV cache another way"),
    "enable_eplb": ("parallel.expert", "redundant experts take memory on every rank"),
    "eplb_config": ("parallel.expert", "redundant experts take memory on every rank"),
    "enable_dbo": ("serving.max_num_batched_tokens", "it splits batches into micro-batches"),
    "ubatch_size": ("serving.max_num_batched_tokens", "it sets micro-batches"),
    "max_num_scheduled_tokens": ("serving.max_num_batched_tokens", "it sets the batch's tokens"),
    "enable_lora": ("model.path", "LoRA adapters take weights and workspaces"),
    "max_loras": ("model.path", "LoRA adapters take weights and workspaces"),
    "max_lora_rank": ("model.path", "LoRA adapters take weights and workspaces"),
    "max_cpu_loras": ("model.path", "LoRA adapters take weights and workspaces"),
    "fully_sharded_loras": ("model.path", "LoRA adapters take weights and workspaces"),
    "lora_modules": ("model.path", "LoRA adapters take weights and workspaces"),
    "limit_mm_per_prompt": ("serving", "the multimodal encoder's cache"),
    "skip_mm_profiling": ("serving", "vLLM then does not profile the multimodal encoder"),
    "mm_ipc_gpu_memory_gb": ("serving", "multimodal inputs on the GPU"),
    "moe_backend": ("prewarm", "the MoE kernels the prewarm compiles and sizes"),
    "linear_backend": ("prewarm", "the GEMM kernels the prewarm compiles"),
    "sparse_indexer_topk_backend": ("prewarm", "the indexer kernels the prewarm compiles"),
    "kernel_config": ("prewarm", "the kernels the prewarm compiles"),
    "additional_config": ("vllm", "options of the runtime the plan cannot read"),
    "worker_extension_cls": ("vllm.worker_cls", "it mixes methods into the planned worker"),
    "device_ids": ("hardware.count", "it picks other GPUs than the launcher checked"),
}
"""Options the launcher does not write that change what the plan sized or what runs, by
vLLM's ``dest``, with the profile key that speaks for them and why. The rest (the API server,
logging, parsers, timeouts) change nothing the plan holds."""
CONFIG = "config"
"""``--config FILE``: vLLM reads more options from the file, which the plan never sees."""


@lru_cache(maxsize=4)
def planned_dests(table: OptionTable) -> dict[str, str]:
    """vLLM's ``dest`` of every flag the launcher writes -> the profile key it comes from."""
    out: dict[str, str] = {"model": "model.path"}
    for row in FLAGS:
        for spelling in row.spellings:
            action = table.by_option.get(spelling)
            out[action.dest if action else spelling.lstrip("-").replace("-", "_")] = row.key
    return out


@dataclass(frozen=True)
class Finding:
    """One item of ``extra_args`` that is refused: where it starts, what it does, the fix."""

    index: int
    kind: str
    """``plan`` (``--force`` lets it through), ``secret`` or ``parser`` (never)."""
    what: str
    fix: str

    @property
    def key(self) -> str:
        return f"vllm.extra_args.{self.index}"

    @property
    def message(self) -> str:
        return f"{self.what}; {self.fix}" if self.fix else self.what


@lru_cache(maxsize=64)
def _resolved(args: tuple[str, ...], table: OptionTable) -> Resolution:
    return resolve(args, table)


def findings(
    extra_args: list[str] | tuple[str, ...], table: OptionTable | None = None
) -> list[Finding]:
    """Every refused item of ``extra_args`` read against ``table`` (default: the shipped one)."""
    if not extra_args:
        return []
    table = table or load_table()
    resolution = _resolved(tuple(str(a) for a in extra_args), table)
    planned = planned_dests(table)
    out = [_stray(extra_args, i) for i in resolution.stray]
    for item in resolution.items:
        found = _finding(item, planned, table)
        if found is not None:
            out.append(found)
    return sorted(out, key=lambda f: f.index)


def _stray(extra_args, i: int) -> Finding:
    if str(extra_args[i]) == "--":
        return Finding(i, "parser", "'--' ends vLLM's options", "remove it")
    return Finding(
        i,
        "parser",
        f"item {i} is neither an option nor an option's value to vLLM's parser (it would "
        "refuse it as unrecognized)",
        "give each option and its value as their own items, e.g. [--seed, '1']",
    )


FORCE = "or pass --force to run it anyway (then printed as a warning)"


def _finding(item: Item, planned: dict[str, str], table: OptionTable) -> Finding | None:
    shown = item.how  # the item as typed and as vLLM reads it, never its value
    if secret_item(item):
        var = SECRET_VARIABLES.get(item.dest or "")
        where = f"the variable {var}" if var else "a variable or a file only its owner reads"
        return Finding(
            item.first,
            "secret",
            f"{shown} puts a secret on vLLM's command line (every process list, run record "
            "and emitted manifest would show it)",
            f"remove it and pass {where} instead (a Kubernetes Secret, an env_file for compose)",
        )
    if item.unknown:
        return None  # an option only the installed vLLM may have: the launch checks it
    if item.problem:
        return Finding(item.first, "parser", item.problem, "")
    if item.dest == "help":
        what = f"{shown} prints vLLM's help and exits: the server never starts"
        return Finding(item.first, "parser", what, "remove it")
    if item.dest == CONFIG:
        return Finding(
            item.first,
            "plan",
            f"{shown} reads more vLLM options from a file the plan never sees (any of them may "
            "change what the plan sized)",
            f"set them in the profile, {FORCE}",
        )
    if item.dest in planned:
        key = planned[item.dest]
        return Finding(
            item.first,
            "plan",
            f"{shown} sets a flag the launcher writes from {key} (vLLM keeps the last, so the "
            "printed plan would not be what runs)",
            f"set {key} instead, {FORCE}",
        )
    if item.dest in SIZED:
        key, why = SIZED[item.dest]
        return Finding(
            item.first,
            "plan",
            f"{shown} changes what the plan sized ({why}; the profile's {key}), and the plan "
            "cannot see it",
            f"remove it, {FORCE}",
        )
    return None


def changes_the_plan(p: Profile) -> Iterator[tuple[str, str]]:
    """Refused unless ``--force``: an item that sets a planned flag or changes what the plan
    sized, or ``--config``."""
    for f in findings(p.vllm.extra_args):
        if f.kind == "plan":
            yield f.key, f.message


def secrets_on_the_command_line(p: Profile) -> Iterator[tuple[str, str]]:
    for f in findings(p.vllm.extra_args):
        if f.kind == "secret":
            yield f.key, f.message


def secrets_in_the_command(p: Profile) -> Iterator[tuple[str, str]]:
    """``vllm.command`` is on the command line too: a secret option there is refused alike."""
    command = [str(a) for a in p.vllm.command]
    flagged = set()
    for item in resolve(command, load_table()).items:
        if secret_item(item):
            flagged.update(range(item.first, item.last + 1))
            yield (
                f"vllm.command.{item.first}",
                f"{item.how} puts a secret on vLLM's command line (every process list shows "
                "it); remove it and pass it in the environment (VLLM_API_KEY, HF_TOKEN)",
            )
    for i, word in enumerate(command):  # a word of a secret's shape (a URL's userinfo)
        if i not in flagged and secret_value(word):
            yield (
                f"vllm.command.{i}",
                f"item {i} holds a credential (a URL's userinfo, or a secret key in JSON or "
                "YAML; not shown): every process list shows it; pass it in the environment",
            )


def vllm_would_refuse(p: Profile) -> Iterator[tuple[str, str]]:
    for f in findings(p.vllm.extra_args):
        if f.kind == "parser":
            yield f.key, f.message


def forced(p: Profile) -> Iterator[tuple[str, str]]:
    """A warning for each item ``--force`` let through (without it, the load refuses them)."""
    for f in findings(p.vllm.extra_args):
        if f.kind == "plan":
            yield f.key, f"--force let it through: {f.what}"
