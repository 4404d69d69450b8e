"""The profile schema: one source of truth for keys, defaults, docs and JSON Schema.

Each field's docstring becomes its JSON Schema ``description`` when the schema is exported
(``describe_fields``). A test fails any field without one.

Which keys matter to what lives beside the fields too (as vLLM's configs keep their ignored
factors): an :class:`Unread` marker names the readers that never read a key (or any key of a
section) and why. The plan's fingerprint, what ``Deployment.with_profile`` keeps and what a
sweep may vary without gathering the facts again are derived from the markers
(:func:`unread_paths`), never kept in lists of their own.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)

from launcher.contract.base import field_docstrings
from launcher.units import GiB, MiB, parse_size
from launcher.vllm import lines
from launcher.vllm.capabilities import UPSTREAM_RELEASES

UNITLESS_FLOOR = MiB
"""A size written without a unit below this is a forgotten unit (``memory: 96``), not bytes."""
BYTES_CONTEXT = "sizes_in_bytes"
"""Validation context key: the data holds sizes in bytes (a plan's own profile_data)."""


def _profile_size(value: Any, info: ValidationInfo) -> int:
    """A size as a profile writes it; a number without a unit under 1 MiB is refused."""
    n = parse_size(value)
    if info.context and info.context.get(BYTES_CONTEXT):
        return n
    unitless = isinstance(value, int | float) or (
        isinstance(value, str) and value.strip().replace(".", "", 1).isdigit()
    )
    if unitless and float(value) > 0 and n < UNITLESS_FLOOR:
        shown = str(value).strip()
        raise ValueError(
            f"{shown} has no unit, so it would mean {n} bytes; write {shown}GiB (or "
            f"{shown}GB), or a number of bytes of at least 1 MiB"
        )
    return n


def _no_yes_no(value: Any, info: ValidationInfo) -> Any:
    """YAML reads yes/no/on/off/true/false as booleans: refused where a number is meant."""
    if not isinstance(value, bool):
        return value
    raise ValueError(
        "expected a number, not a yes/no value (YAML reads yes, no, on, off, true and false "
        "as booleans); write a number"
    )


Size = Annotated[
    int,
    BeforeValidator(_profile_size),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 0},
                {"type": "string", "pattern": r"^\s*[0-9.]+\s*([KMGT]i?B?|B)?\s*$"},
            ],
            "description": "bytes, or a size such as 512MiB or 95.01GiB",
        }
    ),
]
PositiveInt = Annotated[int, Field(gt=0)]

KvCacheDtype = Literal[
    "auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_ds_mla", "nvfp4_ds_mla"
]


def _env_value(value: Any) -> Any:
    """YAML reads ``NCCL_IB_DISABLE: 1`` as an int; the environment wants a string."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int | float):
        return str(value)
    return value


class Reader(enum.Flag):
    """What reads a profile's keys, beside the planner (which reads them all)."""

    FINGERPRINT = enum.auto()
    """The plan's fingerprint (``plan.fingerprint``), which keys calibration records, qualified
    records and cache artifacts: a key that changes no byte of memory or compiled code is not
    hashed, so changing it keeps the deployment's records."""
    DEPLOYMENT = enum.auto()
    """``deployment.resolve``, which derives the deployment's values: a profile differing from
    another only in keys it does not read keeps the other's deployment (``with_profile``)."""
    FACTS = enum.auto()
    """``plan.inputs.gather``'s figures (the model's facts, the GPU kind, the weights per rank;
    its checks of the settings run again at each use): a sweep varying only keys it does not
    read gathers the facts once."""


ANY = Reader.FINGERPRINT | Reader.DEPLOYMENT | Reader.FACTS
"""Every reader: a label, or where the deployment listens or keeps its files."""


@dataclass(frozen=True)
class Unread:
    """Field metadata: the readers (``by``) that never read this key, or any key of this
    section, and why. A key without one counts as read by every reader: a reader that reads
    one more key costs a second gather or resolve or another fingerprint, never a wrong plan
    (``tests/unit/test_key_dependence.py`` changes each marked key and checks each reader)."""

    by: Reader
    why: str


def _label(what: str) -> Unread:
    return Unread(ANY, what)


def _planner_only(why: str) -> Unread:
    """A key only the planner reads of the gathered facts' inputs (and no derived value)."""
    return Unread(Reader.FACTS, why)


class Section(BaseModel):
    """Base of every profile section: immutable, unknown keys refused."""

    # defer_build: the validator is built once, for the whole Profile, at its first
    # validation, instead of once per section class at import (the dry run's largest cost).
    # No use_attribute_docstrings: it reads each class's source at import (40 ms of every dry
    # run, which shows no description); describe_fields() reads them when they are needed.
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    @field_validator("*", mode="before")
    @classmethod
    def _numbers_are_not_booleans(cls, value: Any, info: ValidationInfo) -> Any:
        """``count: yes`` is not 1: pydantic would take a boolean for an int or float."""
        if isinstance(value, bool) and info.field_name:
            field = cls.model_fields[info.field_name]
            if not _takes_bool(field.annotation):
                return _no_yes_no(value, info)
        return value


def _takes_bool(annotation: Any) -> bool:
    """Whether a field's type has room for a boolean (or is not a number at all)."""
    import typing

    if annotation is bool or annotation is Any:
        return True
    if annotation in (int, float):
        return False
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is Literal:
        return any(isinstance(a, bool) for a in args)
    if typing.get_origin(annotation) is Annotated:
        return _takes_bool(args[0])
    # unions: a bool is refused only when every member is a number (others refuse it anyway)
    return bool(args) and any(_takes_bool(a) for a in args if a is not type(None))


class Hardware(Section):
    gpu: str = "rtx-pro-6000"
    """GPU kind, a key of the GPU catalog (rtx-pro-6000, rtx-5090, dgx-spark, h100, h200, b200,
    or cpu for vLLM's CPU backend)."""
    count: Annotated[int, Field(gt=0, le=64)] = 1
    """GPUs per node that this deployment uses."""
    nodes: Annotated[int, Field(gt=0, le=1024)] = 1
    """Nodes. More than one maps onto vLLM's own multi-node launch."""
    memory: Annotated[
        Size | None, _planner_only("the card's memory: the planner's total, not a fact it reads")
    ] = None
    """Memory per GPU as CUDA reports it, overriding the catalog (for example 95.01GiB)."""
    reserved_by_others: Annotated[
        Size,
        _label(
            "what other processes hold is the machine's state, not the deployment's (a launch "
            "raises it to what the cards show); hashing it would hide a run's measurements "
            "from the next plan"
        ),
    ] = 0
    """Memory per GPU that other processes already hold (a display, a second server)."""


class Model(Section):
    path: str
    """Checkpoint directory or Hub repo id that vLLM serves. A local directory is read:
    config.json for the architecture and EXL3 layout, safetensors headers for the weights. A
    repo id has its headers read from the Hub (range requests, cached under
    runtime.cache_root), or its catalog facts when the Hub does not answer."""
    architecture: str | None = None
    """Architecture catalog key (glm-5.2, glm-5, deepseek-v3.2, kimi-k2), used when
    config.json is not on disk."""
    checkpoint: str | None = None
    """Hub repo id of a published checkpoint the catalog knows (b12x-launch catalog lists
    them), sizing the weights from its layout facts while model.path is not on this machine;
    no network. A model.path that is itself a repo id is read from the Hub's headers."""
    served_name: Annotated[str | None, _label("what clients call the model")] = None
    """Name clients use in requests (vLLM's --served-model-name)."""
    quantization: str | None = None
    """Weight quantization passed to vLLM (exl3, fp8, ...); none means the checkpoint's dtype."""
    bits_per_weight: Annotated[float, Field(gt=0, le=16)] | None = None
    """Mean bits per weight of the quantized (routed-expert) tensors, used to estimate
    weights when the checkpoint is not on disk (EXL3: 3.42 for the 4x96 GB GLM-5.2 quant)."""
    weights_per_rank: Size | None = None
    """Weights per rank, overriding both headers and estimate."""
    dtype: Literal["auto", "bfloat16", "float16"] = "bfloat16"
    """Activation and unquantized-weight dtype."""
    trust_remote_code: bool = False
    """Pass --trust-remote-code to vLLM."""


class Parallel(Section):
    tensor: Annotated[int, Field(gt=0, le=1024)] = 1
    """Tensor-parallel size (ranks per model replica)."""
    pipeline: Annotated[int, Field(gt=0, le=256)] = 1
    """Pipeline-parallel size."""
    decode_context: Annotated[
        int, Field(gt=0, le=1024), _planner_only("how the KV cache is sharded, not the weights")
    ] = 1
    """Decode context parallel size: KV tokens are sharded over this many of the TP ranks."""
    interleave: Annotated[
        int, Field(gt=0, le=65536), _planner_only("how DCP lays out the KV cache")
    ] = 1
    """Tokens per run when DCP shards a sequence round-robin (--cp-kv-cache-interleave-size);
    must divide the KV block."""
    expert: bool = False
    """Expert parallelism for the MoE layers (--enable-expert-parallel)."""
    dcp_comm_backend: Annotated[str | None, _planner_only("DCP's communication")] = None
    """DCP communication backend (--dcp-comm-backend), when the vLLM build has it."""
    replicate_indexer_cache: Annotated[bool, _planner_only("a KV cache's layout")] = False
    """The DSA indexer cache is replicated on every DCP rank instead of sharded (fork option)."""
    indexer_cache_shards: Annotated[int, Field(gt=0, le=1024)] | None = None
    """DCP ranks the target's DSA indexer cache is sharded over (fork option); each rank then
    stores decode_context / shards times its DCP share. Default: all decode_context ranks.
    The MTP draft's indexer follows the draft cache."""
    replicate_draft_cache: Annotated[bool, _planner_only("a KV cache's layout")] = False
    """The MTP draft layer's cache is replicated on every DCP rank instead of sharded."""


class Speculative(Section):
    method: Literal["none", "mtp"] = "none"
    """Speculative decoding method; mtp uses the checkpoint's next-token-prediction layer."""
    tokens: Annotated[
        int,
        Field(ge=0, le=16),
        _planner_only(
            "the weights change only with MTP on or off (method and tokens both say it; a sweep "
            "keys its facts on Profile.mtp_tokens > 0 as well)"
        ),
    ] = 0
    """Speculative tokens drafted per step (0 with method none)."""


class Serving(Section):
    max_model_len: Annotated[
        int,
        Field(gt=0, le=1 << 26),
        Unread(
            Reader.DEPLOYMENT | Reader.FACTS,
            "the KV cache's requests: gather checks it against the model at each use",
        ),
    ]
    """Longest request (prompt plus output) in tokens."""
    max_num_seqs: Annotated[
        int, Field(gt=0, le=65536), _planner_only("decode rows and capture sizes")
    ] = 8
    """Most sequences decoded at once."""
    max_num_batched_tokens: Annotated[int, Field(gt=0, le=1 << 22)] = 8192
    """Most tokens one scheduler step processes (the prefill chunk)."""
    kv_cache_dtype: Annotated[
        KvCacheDtype, _planner_only("the KV record: gather checks it against the model")
    ] = "auto"
    """KV cache dtype (vLLM's --kv-cache-dtype)."""
    block_size: Annotated[
        Annotated[int, Field(gt=0, le=65536)] | None, _planner_only("the KV block")
    ] = None
    """Tokens per KV block on each rank; default: 64 for the MLA sparse backends, 16 otherwise,
    128 on CPU."""
    cudagraph_mode: Annotated[
        Literal["NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE"],
        _planner_only("the CUDA-graph pool"),
    ] = "FULL_AND_PIECEWISE"
    """CUDA-graph mode (compilation-config cudagraph_mode)."""
    cudagraph_capture_sizes: Annotated[
        Literal["auto"]
        | Annotated[list[Annotated[int, Field(gt=0, le=65536)]], Field(max_length=1024)],
        _planner_only("the CUDA-graph pool"),
    ] = "auto"
    """Batch sizes captured as CUDA graphs. auto: multiples of 1+MTP tokens covering
    max_num_seqs x (1+MTP)."""
    enable_prefix_caching: Annotated[bool, _planner_only("vLLM's scheduling")] = True
    """Reuse KV blocks of shared prefixes."""
    enable_chunked_prefill: Annotated[bool, _planner_only("vLLM's scheduling")] = True
    """Split long prompts into max_num_batched_tokens chunks."""
    max_logprobs: Annotated[int, Field(ge=-1, le=1 << 24)] = 20
    """Most logprobs a request may ask for (vLLM's --max-logprobs; -1: the vocabulary). It
    bounds prompt_logprobs too, and sizes the sampled logprobs' transient."""
    prompt_logprobs: Literal["reserve", "refuse"] = "reserve"
    """Prompt logprobs (and echo with logprobs) compute the whole prefill chunk's logits on every
    rank after sizing. reserve: the plan keeps room for them; refuse: the server answers such
    requests with HTTP 400 and the plan keeps none (for a chunk and vocabulary too large)."""
    host: Annotated[str, _label("where the server listens")] = "0.0.0.0"
    """Address the OpenAI-compatible server listens on."""
    port: Annotated[int, Field(ge=1, le=65535), _label("where the server listens")] = 8000
    """Port the server listens on."""


class Memory(Section):
    jit_headroom: Literal["measure"] | Size = "measure"
    """Memory kept free for kernels that compile after sizing. measure: the transient peak
    the prewarm measured (an estimate until a run has been measured); or a size."""
    safety_margin: Size = 512 * MiB
    """Memory per GPU never given to the KV cache."""
    kv_tokens: Annotated[int, Field(gt=0, le=1 << 40)] | None = None
    """Pin the KV cache to this many logical tokens instead of the largest that fits."""
    kv_cache_bytes: Size | None = None
    """Pin the KV cache to this many bytes per GPU instead of the largest that fits."""


POOL_MOST = 256
"""A bound on ``prewarm.inductor_pool`` (each process imports torch)."""


def _pool_size(value: Any) -> Any:
    """``prewarm.inductor_pool``: ``auto``, 0 (off) or 2 processes or more, said in one line."""
    if value == "auto" or (type(value) is int and (value == 0 or 2 <= value <= POOL_MOST)):
        return value
    one = "; a pool of one process is none" if value == 1 and type(value) is int else ""
    raise ValueError(
        f"expected auto, 0 (no pool) or a number of compile processes from 2 to {POOL_MOST}{one}"
    )


InductorPoolSize = Annotated[
    Literal["auto"] | int,
    BeforeValidator(_pool_size),
    WithJsonSchema(
        {
            "anyOf": [
                {"const": "auto", "type": "string"},
                {"const": 0, "type": "integer"},
                {"type": "integer", "minimum": 2, "maximum": POOL_MOST},
            ]
        }
    ),
]


class Prewarm(Section):
    enabled: bool = True
    """Compile and run every kernel specialization before vLLM sizes the KV cache."""
    providers: list[str] = ["b12x", "vllm", "triton"]
    """Prewarm providers to run, by registry name."""
    autotune: bool = False
    """Let b12x autotune during prewarm (its races may borrow up to half of free memory)."""
    compile_workers: PositiveInt | None = None
    """CPU processes b12x compiles in; default: b12x's own choice."""
    strict_jit: Annotated[
        bool, _label("whether a late compile is fatal, not whether it happens")
    ] = False
    """A kernel compiled after sizing is fatal instead of logged (from serving's start: vLLM's
    own warmup prepares b12x plans on first use, so a frozen session would refuse them there)."""
    canary: Annotated[
        bool, _label("a proof of the late-compile counters; its kernels are never learned")
    ] = False
    """Compile one deliberately new kernel after sizing, in vLLM's warmup and again in serving,
    which every late-compile counter must report: proof that each was counting (the GPU tier's
    canary boot). Its compiles are recorded as late and never learned."""
    early_keys: bool = True
    """Compile the keys the kernels served so far are missing into Triton's disk cache in
    background threads while the stage's waves run, so the key pass after them loads instead
    of compiling (was ``BLAUNCH_EARLY_KEYS``)."""
    sampler_ahead: bool = True
    """Compile vLLM's top-k/top-p Triton sampler keys in a thread beside the first wave's
    torch.compile instead of after it (was ``BLAUNCH_SAMPLER_AHEAD``)."""
    inductor_pool: InductorPoolSize = "auto"
    """Inductor's compile processes per rank while the stage's passes run: auto, the rank's
    share of the CPUs less one, at most 8; 0 turns the pool off (vLLM's one compile thread);
    N (2 or more) asks for N. Shut down before sizing (was ``BLAUNCH_INDUCTOR_POOL``)."""
    compile_times: Annotated[
        bool,
        _label(
            "a diagnostic of where the stage's time goes: its Triton hooks and stack sampler "
            "change no byte of memory or compiled code (hooked and unhooked boots matched bit "
            "for bit on the H200, docs/gpu-runs/2026-12-01-h200-watch-fidelity.json), and a "
            "traced boot must keep the fingerprint of the boot it traces, whose records and "
            "cache artifact it restores"
        ),
    ] = False
    """Time every Triton compile of the prewarm and sample its thread's stack every 20 ms,
    logged after the stage; the hooks come off before vLLM's own warmup (was
    ``BLAUNCH_COMPILE_TIMES``)."""


def _known_line(value: str) -> str:
    """``vllm.runtime``: ``auto`` or a line of the registry as it is when validated (a new
    line needs no edit here); worded as a Literal's error, with the closest name."""
    known = ("auto", *lines.names())
    if value in known:
        return value
    import difflib  # only for a name that is wrong: not on every load

    close = difflib.get_close_matches(value, known, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    choices = ", ".join(repr(k) for k in known[:-1])
    raise ValueError(f"Input should be {choices} or {known[-1]!r}{hint}")


VllmLineName = Annotated[
    str,
    AfterValidator(_known_line),
    WithJsonSchema({"enum": ["auto", *lines.names()], "type": "string"}),
]
"""A ``vllm.runtime`` value; editors see the lines registered when the schema is written."""


class Vllm(Section):
    runtime: VllmLineName = "auto"
    """Which vLLM this deployment targets: upstream, the fork line Gilded Gnosis / SparkInfer
    (backend B12X_MLA_SPARSE), or the fork line with the b12x package (backend B12X). They
    differ in KV record size, backend names and warmups. auto: inferred from
    attention_backend for a dry run, probed from the installed vLLM at launch."""
    release: Annotated[
        Literal[("auto", *UPSTREAM_RELEASES)],  # type: ignore[valid-type]
        BeforeValidator(lambda v: f"{v:.2f}" if isinstance(v, float) else v),  # YAML's 0.32
    ] = "auto"
    """The upstream vLLM release a dry run checks the deployment against (what each line's
    attention backends can run: DCP, KV dtypes, block sizes). auto: 0.26, the oldest
    supported; a launch checks the installed vLLM. Fork lines have one entry each."""
    attention_backend: str | None = None
    """Attention backend (--attention-backend), e.g. B12X_MLA_SPARSE."""
    worker_cls: str = "auto"
    """Worker class; auto: the launcher's planned worker for the platform."""
    extra_args: list[str] = []
    """Arguments appended verbatim to the vLLM command line."""
    command: list[str] = ["vllm", "serve"]
    """How vLLM is started; the model path and flags follow."""


class Runtime(Section):
    cache_root: str = "~/.cache/b12x-launch"
    """Root of every JIT cache (Triton, b12x, CuTe DSL, vLLM, Inductor) and of calibration
    records; /cache in the container."""
    run_dir: str = "runs"
    """Where each launch writes its plan and measurement records (relative to the cwd)."""
    multinode: Literal["mp", "ray"] = "mp"
    """How several nodes join: vLLM's multiprocess launch (--nnodes/--node-rank/--master-addr,
    one b12x-launch per node) or a Ray cluster started beforehand."""
    node_rank: Annotated[int, Field(ge=0)] = 0
    """This node's rank with multinode mp (0 serves the API; the others run headless)."""
    master_addr: str | None = None
    """Address of node 0, which every node must reach (multinode mp)."""
    master_port: Annotated[int, Field(ge=1, le=65535)] = 29500
    """Port on node 0 for the nodes' rendezvous (multinode mp)."""


class Qualify(Section):
    """The worst case ``b12x-launch qualify`` drives through the server before pinning the KV
    cache. Every default is derived from ``serving``: prompts that fill ``max_model_len``
    (through chunked prefill) and ``max_num_seqs`` long decodes at once."""

    prompt_tokens: Annotated[int, Field(gt=0, le=1 << 26)] | None = None
    """Prompt length of every request in tokens; default: max_model_len minus output_tokens,
    so each sequence ends at max_model_len."""
    output_tokens: Annotated[int, Field(gt=0, le=1 << 20)] | None = None
    """Tokens each request decodes (end-of-sequence ignored); default: max_model_len / 16,
    at least 1 and at most 1024."""
    concurrency: Annotated[int, Field(gt=0, le=65536)] | None = None
    """Requests in flight at once; default: serving.max_num_seqs."""
    requests: Annotated[int, Field(gt=0, le=1 << 20)] | None = None
    """Requests in all; default: twice the concurrency, so a second wave prefills while the
    first decodes."""
    max_seconds: Annotated[float, Field(gt=0, le=86400)] = 1800.0
    """Longest the workload may run; requests still in flight then count as failed."""
    boot_seconds: Annotated[float, Field(gt=0, le=86400)] = 3600.0
    """Longest a boot may take before the server answers /health."""
    sample_ms: Annotated[float, Field(ge=1, le=10000)] = 20.0
    """Interval of the physical free-memory sampler (NVML) in milliseconds."""


class Profile(Section):
    """A deployment: what to serve, on what, and how memory is spent."""

    name: Annotated[str | None, _label("a label for humans")] = None
    """Short name of the deployment (default: the file name)."""
    description: Annotated[str, _label("a label for humans")] = ""
    """Free text for humans."""
    # Defaults by model_construct(): the sections' own constants, not validated, which would
    # build each section's validator at import (half the schema's import time).
    hardware: Hardware = Hardware.model_construct()
    """The GPUs."""
    model: Model
    """The checkpoint."""
    parallel: Parallel = Parallel.model_construct()
    """How ranks split the model and the KV cache."""
    speculative: Speculative = Speculative.model_construct()
    """Speculative decoding."""
    serving: Serving
    """Request shapes the server must accept."""
    memory: Annotated[
        Memory,
        Unread(
            Reader.DEPLOYMENT | Reader.FACTS,
            "how memory is reserved around the KV cache: the planner's alone",
        ),
    ] = Memory.model_construct()
    """How memory is reserved around the KV cache."""
    prewarm: Annotated[Prewarm, _planner_only("what the workers compile")] = (
        Prewarm.model_construct()
    )
    """Kernel prewarm before sizing."""
    vllm: Vllm = Vllm.model_construct()
    """vLLM options not covered above."""
    runtime: Annotated[
        Runtime, _label("where caches and records live (not what is in them), how nodes join")
    ] = Runtime.model_construct()
    """Cache and run directories."""
    qualify: Annotated[
        Qualify,
        _label(
            "the workload qualify drives, not the deployment it drives it through (the "
            "qualified record keeps the workload it survived)"
        ),
    ] = Qualify.model_construct()
    """The workload of ``b12x-launch qualify`` (default: the worst case of ``serving``)."""
    env: dict[str, Annotated[str, BeforeValidator(_env_value)]] = {}
    """Environment for vLLM and its workers; numbers and booleans become strings
    (true is "1", false is "0")."""

    @property
    def mtp_tokens(self) -> int:
        """Speculative tokens per step (0 without speculative decoding)."""
        return self.speculative.tokens if self.speculative.method != "none" else 0

    @property
    def world_size(self) -> int:
        """Ranks in the deployment (TP x PP)."""
        return self.parallel.tensor * self.parallel.pipeline


@functools.cache
def unread_paths(reader: Reader) -> tuple[tuple[str, ...], ...]:
    """The keys ``reader`` never reads, by path (a section's own path where the section's field
    is marked), from the :class:`Unread` markers."""
    return tuple(_unread(Profile, reader, ()))


def _unread(model: type[BaseModel], reader: Reader, prefix: tuple[str, ...]):
    for name, field in model.model_fields.items():
        path = (*prefix, name)
        marks = [m for m in field.metadata if isinstance(m, Unread)]
        if any(reader in m.by for m in marks):
            yield path
        elif isinstance(field.annotation, type) and issubclass(field.annotation, Section):
            yield from _unread(field.annotation, reader, path)


def without_unread(data: dict[str, Any], reader: Reader) -> dict[str, Any]:
    """``data`` (a profile's ``model_dump``) less the keys ``reader`` never reads, in place."""
    for path in unread_paths(reader):
        node = data
        for key in path[:-1]:
            node = node.get(key, {})
        node.pop(path[-1], None)
    return data


@functools.cache
def describe_fields() -> None:
    """Give every field its docstring as its ``description`` (once per process, before the
    JSON Schema is generated); the sections are rebuilt before the Profile that holds them."""
    docs = field_docstrings(__name__)
    sections = [model for model in Section.__subclasses__() if model is not Profile]
    for model in (*sections, Profile):
        for name, field in model.model_fields.items():
            field.description = docs.get(model.__name__, {}).get(name)
        model.model_rebuild(force=True)


def json_schema() -> dict[str, Any]:
    """The profile's JSON Schema (generated, never hand-written)."""
    describe_fields()
    schema = Profile.model_json_schema()
    schema["properties"]["extends"] = {
        "type": "string",
        "description": "A parent profile (path relative to this file); maps merge, lists replace.",
    }
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "b12x-launch profile"
    return schema


__all__ = ["GiB", "Profile", "json_schema"]
