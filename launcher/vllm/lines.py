"""Which vLLM line a deployment runs on: the one registry of lines, and what differs.

The same profile can meet upstream vLLM or one of two lines of the fork that serves GLM-5.2
(../shared/FORK-AUDIT.md): they differ in the sparse-MLA backend's name, the nvfp4 KV
record size, the kernel package behind the backend and which warmup entry points exist.
A :class:`VllmLine` holds those facts and the line's capability tables
(:mod:`launcher.vllm.capabilities`, one per release). :data:`VLLM_LINES` is the only list
of lines: the schema validates ``vllm.runtime`` against it, :func:`infer` and the installed
vLLM's probe walk it, and whether a line can serve a profile (``launcher.vllm.can_serve``,
for the dry run, the launch and the container's entry point) asks :func:`lines_with` which
lines have what a profile asks for. A new line is one entry there.

The profile names a line (``vllm.runtime``, a user-facing key that keeps its name) or says
``auto``; the dry run then infers it from the attention backend, and a launch probes the
installed vLLM's files (``can_serve.probe_installed``): never a version string, never an
import.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from launcher.vllm import capabilities
from launcher.vllm.capabilities import Line


class ModelFacts(Protocol):
    """What a line's KV-record rules read of the model (``launcher.contract.facts``'s
    ``ModelFacts`` has it; the vLLM room sits below the contract and names none of its types)."""

    @property
    def model_type(self) -> str: ...
    @property
    def kv_lora_rank(self) -> int: ...
    @property
    def qk_rope(self) -> int: ...
    @property
    def is_mla(self) -> bool: ...
    @property
    def has_indexer(self) -> bool: ...


GLM_DSA_MODEL_TYPES = ("glm_moe_dsa", "deepseek_mtp")
"""Model types whose nvfp4 record the fork lines size specially (GLM-5.2 and its draft)."""


FP8_DTYPES = ("fp8", "fp8_e4m3", "fp8_e5m2")
"""``--kv-cache-dtype`` values that store one byte per element."""
DS_MLA_FP8_BACKENDS = ("FLASHMLA_SPARSE", None)
"""Backends that store an fp8 KV cache of a DSA model as the 656-byte V3.2 record: vLLM's
FlashMLA sparse backend turns any quantized ``--kv-cache-dtype`` into ``fp8_ds_mla``
(``_canonicalize_sparse_mla_kv_cache_dtype``); None: no backend named, so vLLM picks it for a
DSA model on Hopper and Blackwell-datacenter cards."""


def stored_kv_dtype(facts: ModelFacts, kv_dtype: str, backend: str | None) -> str:
    """The KV dtype vLLM really stores: ``fp8`` becomes ``fp8_ds_mla`` on a sparse-MLA (DSA)
    model under FlashMLA's sparse backend, as vLLM 0.26 does it."""
    if (
        kv_dtype in FP8_DTYPES
        and facts.is_mla
        and facts.has_indexer
        and backend in DS_MLA_FP8_BACKENDS
    ):
        return "fp8_ds_mla"
    return kv_dtype


@dataclass(frozen=True)
class VllmLine:
    """One vLLM line: upstream, or a fork line. Everything the launcher knows of it."""

    name: str
    """``vllm.runtime`` value."""
    title: str
    sparse_mla_backends: tuple[str, ...]
    """``--attention-backend`` names this runtime has for sparse MLA."""
    kernel_package: str | None
    """The package behind its B12X backend (its own compile cache): sparkinfer or b12x."""
    exl3: bool
    """Whether it loads EXL3 checkpoints (``--quantization exl3``)."""
    nvfp4_record: str
    """How it sizes one nvfp4_ds_mla record: ``upstream`` (352), ``env`` (432, 368 with
    KV_FP8_ROPE=1 on GLM-DSA models), ``fp8_rope`` (368 on GLM-DSA models, else by env)."""
    lse_scale: str
    """The LSE base its sparse-MLA backend asks b12x for (``natural`` or b12x's ``base2``)."""
    warmups: tuple[str, ...]
    """The runtime's own warmup entry points the runtime provider drives, in order (names of
    ``launcher.runtime.prewarm.providers.vllm_warmup.ENTRY_POINTS``, which find each by capability);
    those that need a KV cache run on the scratch one, after the others."""
    markers: tuple[str, ...]
    """Files (relative to the vllm package) whose presence identifies this line; none: the
    line the probe falls back to (upstream)."""
    tables: dict[str, Line]
    """Its capability tables by release (``vllm.release``); a fork line has one, under its
    own name, whatever its base."""
    image: str | None = None
    """A container base image that ships this line (the entrypoint names it when the
    image's vLLM lacks what the profile asks for)."""
    gathers_ckv: bool = False
    """DCP prefill gathers the full compressed KV when ``VLLM_B12X_MLA_CKV_GATHER=1``: an
    extend plan over the rank's own heads and the DCP top-k remap kernels."""
    profile_stand_ins: bool = False
    """Its profile run's stand-ins (the MLA context chunk, the indexer's logits, the MTP
    drafter repeating both at capture) are what the plan's boot-1 estimates model: measured
    on upstream 0.26 (H200); a fork line keeps the earlier estimate until a run measures it."""

    @property
    def versioned(self) -> bool:
        """Its tables are per upstream release: a launch reads the installed version."""
        return len(self.tables) > 1

    def table(self, release: str | None) -> Line:
        """The capability table at upstream ``release`` (None or ``auto``:
        :data:`capabilities.DRY_RUN_RELEASE`); a fork line's one table whatever is asked."""
        if len(self.tables) == 1:
            return next(iter(self.tables.values()))
        if release in (None, "auto"):
            release = capabilities.DRY_RUN_RELEASE
        return self.tables[release]

    def fp8_rope(self, facts: ModelFacts, env: dict[str, str]) -> bool:
        """Whether the nvfp4 record stores RoPE in fp8 (368 B) rather than bf16 (432 B)."""
        glm = facts.model_type in GLM_DSA_MODEL_TYPES
        if self.nvfp4_record == "fp8_rope" and glm:
            return True
        if self.nvfp4_record == "upstream":
            return True
        return env.get("KV_FP8_ROPE") == "1" and (glm or self.nvfp4_record == "fp8_rope")

    def nvfp4_record_bytes(self, facts: ModelFacts, env: dict[str, str]) -> int:
        """Bytes of one nvfp4_ds_mla record per token per layer in this runtime."""
        lora, rope = facts.kv_lora_rank, facts.qk_rope
        packed = lora // 2 + lora // 16  # fp4 latent, one fp8 scale per 16
        if self.nvfp4_record == "upstream":
            return packed + rope  # fp8 RoPE, no tail
        rope_bytes = rope if self.fp8_rope(facts, env) else 2 * rope
        return packed + rope_bytes + 16  # + 16 B global scale and padding

    def describe_record(self, facts: ModelFacts, env: dict[str, str]) -> str:
        bytes_ = self.nvfp4_record_bytes(facts, env)
        if self.nvfp4_record == "upstream":
            return f"{bytes_} B nvfp4 record ({self.title})"
        why = "fp8 RoPE" if self.fp8_rope(facts, env) else "bf16 RoPE"
        return f"{bytes_} B nvfp4 record ({self.title}, {why})"


VLLM_LINES: dict[str, VllmLine] = {
    r.name: r
    for r in (
        VllmLine(
            name="upstream",
            title="upstream vLLM",
            sparse_mla_backends=("FLASHMLA_SPARSE",),
            kernel_package=None,
            exl3=False,
            nvfp4_record="upstream",
            lse_scale="base2",
            warmups=(
                "moe_token_buckets",
                "block_table_warmup",
                "sparse_mla_triton_warmup",
                "deep_gemm_warmup",
                "b12x_warmup",
                "jit_warmup_registry",
                "compiled_helpers",
                "serving_batches",
                "capture_shapes",
                "sampler_warmup",
            ),
            markers=(),
            tables=capabilities.upstream_tables(),
            image="vllm/vllm-openai:v0.32.0",
            profile_stand_ins=True,
        ),
        VllmLine(
            name="gilded-gnosis",
            title="fork line Gilded Gnosis / SparkInfer",
            sparse_mla_backends=("B12X_MLA_SPARSE", "FLASHMLA_SPARSE"),
            kernel_package="sparkinfer",
            exl3=True,
            nvfp4_record="env",
            lse_scale="natural",
            warmups=(
                "moe_token_buckets",
                "block_table_warmup",
                "sparse_mla_triton_warmup",
                "attention_impl_plans",
                "deep_gemm_warmup",
                "compiled_helpers",
                "serving_batches",
                "capture_shapes",
                "sampler_warmup",
            ),
            # Not warmup/sparse_mla_triton_warmup.py: stock 0.26 ships it (the H200 kit's
            # vLLM was taken for this line). Its backend exists only in the forks, and the
            # b12x-package line (which has it too) is probed first.
            markers=("v1/attention/backends/mla/b12x_mla_sparse.py",),
            tables=capabilities.fork_tables("gilded-gnosis", "B12X_MLA_SPARSE"),
            # The local-inference-lab vLLM fork as its own compose examples publish it.
            image="voipmonitor/vllm:gilded-gnosis-v20-vllm1e9c9c3-sieec30ff-fi801d57a-cu132-"
            "20260731-r16",
            gathers_ckv=True,
        ),
        VllmLine(
            name="b12x-fork",
            title="fork line with the b12x package",
            sparse_mla_backends=("B12X", "FLASHMLA_SPARSE"),
            kernel_package="b12x",
            exl3=True,
            nvfp4_record="fp8_rope",
            lse_scale="natural",
            warmups=(
                "b12x_prepare",
                "moe_token_buckets",
                "block_table_warmup",
                "b12x_warmup",
                "sparse_mla_triton_warmup",
                "attention_impl_plans",
                "deep_gemm_warmup",
                "jit_warmup_registry",
                "compiled_helpers",
                "serving_batches",
                "capture_shapes",
                "sampler_warmup",
            ),
            # Not utils/b12x.py: upstream has it too (0.32: accessors for the optional b12x
            # package behind its paged B12X backend), and it is no sign of this line.
            markers=("v1/worker/b12x_startup.py", "model_executor/warmup/b12x_prepare.py"),
            tables=capabilities.fork_tables("b12x-fork", "B12X"),
            # It gathers the full CKV only for GLM5Next models, which no profile describes.
        ),
    )
}
"""Every vLLM line, in lineage order: a line that carries an earlier line's files (the
b12x-package line has Gilded Gnosis's backend file) comes after it, so the probe, which
walks the lines last first, names the most derived line whose files it finds."""


def names() -> tuple[str, ...]:
    """The ``vllm.runtime`` values besides ``auto``, read when a profile is validated."""
    return tuple(VLLM_LINES)


def fallback() -> VllmLine:
    """The line without fork markers (upstream): what anything unmarked runs."""
    return next(line for line in VLLM_LINES.values() if not line.markers)


def b12x_sparse_mla_backends() -> tuple[str, ...]:
    """The fork lines' b12x sparse-MLA backends: each line with a kernel package, its
    sparse-MLA backends that the fallback lacks (upstream's own ``B12X`` is paged attention,
    not sparse MLA: there it is dense)."""
    common = fallback().sparse_mla_backends
    out = [
        b
        for line in VLLM_LINES.values()
        if line.kernel_package
        for b in line.sparse_mla_backends
        if b not in common
    ]
    return tuple(dict.fromkeys(out))


def sparse_mla_backends() -> tuple[str, ...]:
    """Sparse-MLA backend names over every line, the b12x ones first."""
    every = (b for line in VLLM_LINES.values() for b in line.sparse_mla_backends)
    return tuple(dict.fromkeys((*b12x_sparse_mla_backends(), *every)))


LineKey = Literal["vllm.attention_backend", "model.quantization"]
"""The profile keys whose values set lines apart."""


def lines_with(key: LineKey, value: str | None) -> list[VllmLine]:
    """The lines that have what profile ``key`` asks for as ``value``: a sparse-MLA backend
    (``vllm.attention_backend``) or EXL3 (``model.quantization``). Any other value (another
    backend or method, or none) sets no line apart, so every line is taken to have it."""
    if key == "vllm.attention_backend" and value in sparse_mla_backends():
        return [line for line in VLLM_LINES.values() if value in line.sparse_mla_backends]
    if key == "model.quantization" and value == "exl3":
        return [line for line in VLLM_LINES.values() if line.exl3]
    return list(VLLM_LINES.values())


def infer(backend: str | None) -> VllmLine:
    """The line a profile's attention backend implies (``vllm.runtime: auto`` on a dry run):
    a sparse-MLA backend only one line has (``B12X_MLA_SPARSE``: Gilded Gnosis; ``B12X``:
    the b12x-package line) names that line; anything else runs on the fallback (upstream)."""
    having = lines_with("vllm.attention_backend", backend)
    return having[0] if len(having) == 1 else fallback()


def resolve(name: str, backend: str | None) -> tuple[VllmLine, str]:
    """The line a profile targets and how it was decided."""
    if name != "auto":
        return VLLM_LINES[name], "profile"
    return infer(backend), f"inferred from vllm.attention_backend {backend or '(not set)'}"


class _AllTables(Mapping[str, Line]):
    """Every table of every registered line, by release or fork-line name, read from the
    registry when asked (a test may register a line)."""

    def _tables(self) -> dict[str, Line]:
        return {k: t for line in VLLM_LINES.values() for k, t in line.tables.items()}

    def __getitem__(self, key: str) -> Line:
        return self._tables()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tables())

    def __len__(self) -> int:
        return len(self._tables())


LINES: Mapping[str, Line] = _AllTables()
"""Every table the launcher knows, by upstream release or fork-line name."""


def line_for(runtime: str, release: str | None) -> Line:
    """The table of line ``runtime`` (a ``VLLM_LINES`` key) at upstream ``release`` (``0.26``
    ..., None or ``auto``: ``capabilities.DRY_RUN_RELEASE``); a fork line has one table
    whatever its base."""
    return VLLM_LINES[runtime].table(release)
