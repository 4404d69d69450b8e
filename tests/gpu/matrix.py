"""Generated deployments of the tier models: the space a user may ask for, not the three we wrote.

From a seed, :func:`generate` draws deployments of each tier model over the axes a profile
varies (``max_num_seqs``, ``max_num_batched_tokens``, ``max_model_len``, MTP tokens where the
model has an MTP layer, CUDA-graph capture sizes and mode, block size and KV dtype where the
backend takes them) and keeps those the launcher itself accepts: the profile loads, its coupling
rules hold, the vLLM line's capability table can run it, and the plan fits the card. Nothing
here boots: ``tests/gpu/test_matrix.py`` boots each one, and the unit tier checks the generator.

    python -m tests.gpu.matrix SEED [COUNT]     print the deployments and each one's command

Every deployment names the seed and index that made it, and the one command that boots it
again (``Generated.command``).
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from tests.gpu.boot import BootSpec

PROFILES = {
    "glm_dsa": "glm-dsa-h200.yaml",
    "deepseek_v2": "dsv2-moe-h200.yaml",
    "llama": "llama-h200.yaml",
}
"""Each tier model's base profile (tests/gpu/profiles)."""
MTP_TOKENS = {"glm_dsa": (1, 2, 3, 4)}
"""Models with an MTP layer: the draft tokens a deployment may ask for."""
SEQS = (1, 2, 3, 4, 6, 8, 12, 16)
BATCHED = (512, 1000, 1024, 2048, 3000, 4096)
MODEL_LEN = (4096, 8192, 12288, 16384, 20480, 24576, 32768)
"""Up to the tier models' max_position_embeddings (32,768)."""
MODES = ("FULL_AND_PIECEWISE", "PIECEWISE", "FULL_DECODE_ONLY")
BLOCKS = {"glm_dsa": (64,), "deepseek_v2": (64,), "llama": (16, 32, 64)}
"""Block sizes the backend vLLM picks on sm_90 takes (the sparse and dense FlashMLA kernels
take 64 only; FlashAttention any multiple of 16)."""
KV_DTYPES = {"glm_dsa": ("fp8", "auto"), "deepseek_v2": ("auto", "fp8"), "llama": ("auto", "fp8")}
"""KV dtypes, each picking its backend: on the GLM model fp8 is FlashMLA's sparse kernel
(stored as fp8_ds_mla) and auto FlashAttention's sparse MLA; on the MoE model fp8 moves from
FlashAttention's MLA to FlashMLA."""
MIX = ("glm_dsa", "deepseek_v2", "glm_dsa", "llama")
"""The order models are drawn in: GLM, the model the launcher exists for, every other one."""


@dataclass(frozen=True)
class Generated:
    seed: int
    index: int
    model: str
    sets: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"gen{self.seed}-{self.index}"

    @property
    def profile(self) -> str:
        return PROFILES[self.model]

    def spec(self, plain: bool = False) -> BootSpec:
        """The boot, from an empty cache root of its own (plain vLLM: another one), serving
        the users' traffic of the matrix's seed (so ``command`` sends the same requests)."""
        name = self.name + ("-plain" if plain else "")
        return BootSpec(
            name,
            self.profile,
            self.model,
            self.sets,
            cache=name,
            plain=plain,
            workload="users",
            seed=self.seed,
        )

    def again(self) -> BootSpec:
        """Boot 2: the same deployment on boot 1's cache root (its records calibrate the plan)."""
        return replace(self.spec(), name=self.name + "-again", cache=self.name)

    def command(self) -> str:
        """The one command that boots this deployment again (on the device, kit staged)."""
        where = "tests/gpu/run-tier.sh tests/gpu/test_matrix.py"
        return f'GPU_MATRIX_SEED={self.seed} {where} -k "{self.name}"'

    def describe(self) -> str:
        return f"{self.name} {self.model}: " + " ".join(self.sets)


def draw(rng: random.Random, model: str) -> tuple[str, ...]:
    """One deployment of ``model`` as ``--set`` pairs (not yet checked)."""
    spec = rng.choice(MTP_TOKENS.get(model, (0,)))
    width = 1 + spec
    seqs = rng.choice(SEQS)
    model_len = rng.choice(MODEL_LEN)
    batched = rng.choice([b for b in BATCHED if b >= seqs * width])
    mode = rng.choice(MODES)
    top = seqs * width
    if rng.random() < 0.3:
        sizes: str = "auto"
    else:
        multiples = [width * n for n in range(1, 2 * seqs + 1) if width * n <= batched]
        picked = set(rng.sample(multiples, k=rng.randint(1, min(5, len(multiples)))))
        picked.add(min(m for m in multiples if m >= top))  # the rule: the largest covers them
        sizes = json.dumps(sorted(picked))
    out = [
        f"serving.max_num_seqs={seqs}",
        f"serving.max_num_batched_tokens={batched}",
        f"serving.max_model_len={model_len}",
        f"serving.cudagraph_mode={mode}",
        f"serving.cudagraph_capture_sizes={sizes}",
        f"serving.block_size={rng.choice(BLOCKS[model])}",
        f"serving.kv_cache_dtype={rng.choice(KV_DTYPES[model])}",
    ]
    if model in MTP_TOKENS:
        out.append(f"speculative={{method: mtp, tokens: {spec}}}")
    return tuple(out)


def accepted(model: str, sets: tuple[str, ...], models: Path) -> str | None:
    """None when the launcher accepts the deployment (loads, rules, capability table, plan
    fits the card); else why not."""
    from launcher import pipeline
    from launcher.errors import ProfileError

    path = Path(__file__).resolve().parent / "profiles" / PROFILES[model]
    # Weights are estimated from config.json here: the boot serves the tier's real model.
    extra = ("vllm.extra_args=[--load-format, dummy]",) if model != "glm_dsa" else ()
    overrides = (f"model.path={_config_only(model, models)}", *sets, *extra)
    try:
        planned = pipeline.make_plan(pipeline.load(str(path), overrides), calibrate=False)
    except ProfileError as exc:
        return str(exc)
    return None if planned.plan.fits else "does not fit the card"


def _config_only(model: str, models: Path) -> Path:
    """The tier model's config.json (and tokenizer, for the GLM model) in ``models``."""
    from tests.gpu import models as tier

    out = models / model
    if model in tier.DUMMY_WEIGHTS:
        return tier.write(model, out)
    if not (out / "config.json").is_file():
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(json.dumps(tier.BUILDERS[model][0]()))
    return out


def generate(seed: int, count: int, models: Path | None = None) -> list[Generated]:
    """``count`` deployments the launcher accepts, drawn from ``seed`` (reproducible: the same
    seed and count give the same list), the models in ``MIX`` order."""
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        root = models or Path(tmp)
        out: list[Generated] = []
        while len(out) < count:
            model = MIX[len(out) % len(MIX)]
            for _ in range(100):
                sets = draw(rng, model)
                if accepted(model, sets, root) is None:
                    break
            else:
                raise RuntimeError(f"seed {seed}: no accepted {model} deployment in 100 draws")
            out.append(Generated(seed, len(out), model, sets))
    return out


if __name__ == "__main__":
    seed = int(sys.argv[1])
    for g in generate(seed, int(sys.argv[2]) if len(sys.argv) > 2 else 8):
        print(g.describe())
        print("   ", g.command())
