"""A checkpoint's config.json is input (issue 41, case 9): every value the planner reads is
typed and bounded before use. 1e9 layers hung the planner, hidden_size 0 divided by zero,
Infinity overflowed, a negative size planned a negative KV cache."""

from __future__ import annotations

import json
import math
import time

import pytest
from click.testing import CliRunner

from launcher.cli import cli
from launcher.plan.checkpoint import CheckpointError, read_header
from launcher.plan.model import ConfigError, from_config
from tests.conftest import PROFILES, deadline

LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "num_attention_heads": 4,
    "vocab_size": 1000,
    "intermediate_size": 128,
    "max_position_embeddings": 512,
}


def dry_run(tmp_path, **changes):
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text(json.dumps({**LLAMA, **changes}))
    args = [
        str(PROFILES / "tiny-cpu.yaml"),
        "--dry-run",
        "--set",
        f"model.path={model}",
        "--set",
        "vllm.extra_args=[--load-format, dummy]",
    ]
    start = time.monotonic()
    with deadline(20):
        result = CliRunner().invoke(cli, args)
    return result, time.monotonic() - start


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"num_hidden_layers": 1e9}, "num_hidden_layers must be a whole number from 1 to 1024"),
        ({"num_hidden_layers": 10**11}, "num_hidden_layers must be from 1 to 1024"),
        ({"hidden_size": 0}, "hidden_size must be from 1"),
        ({"hidden_size": math.inf}, "hidden_size must be a whole number"),
        ({"vocab_size": math.nan}, "vocab_size must be a whole number"),
        ({"intermediate_size": -4096}, "intermediate_size must be from 0"),
        ({"num_attention_heads": "4"}, "num_attention_heads must be a whole number"),
        ({"num_hidden_layers": True}, "num_hidden_layers must be a whole number"),
        ({"text_config": "x"}, "text_config must be a mapping"),
        ({"index_n_heads": 4, "index_layer_pattern": {"dense_first": 0, "period": 0}}, "period"),
        ({"index_n_heads": 4, "index_layers": [0, 10**9]}, "index_layers must be a list"),
    ],
)
def test_a_config_value_out_of_bounds_is_refused_quickly_and_named(tmp_path, change, says):
    result, seconds = dry_run(tmp_path, **change)
    assert result.exit_code == 1, result.output
    assert says in result.stderr, result.stderr
    assert "config.json" in result.stderr and "--set model.path" in result.stderr
    assert "internal error" not in result.output and "Traceback" not in result.output
    assert seconds < 10


def test_the_same_config_in_bounds_plans(tmp_path):
    result, _ = dry_run(tmp_path)
    assert result.exit_code == 0, result.output
    assert "Memory plan" in result.stdout


def test_a_config_that_is_not_an_object_is_refused():
    with pytest.raises(ConfigError, match="not a model config"):
        from_config([1, 2], "m", "config.json")


def test_a_negative_or_absurd_tensor_in_a_safetensors_header_is_refused(tmp_path):
    def header(entry: dict) -> bytes:
        raw = json.dumps({"w": entry}).encode()
        return len(raw).to_bytes(8, "little") + raw

    path = tmp_path / "m.safetensors"
    for entry in (
        {"dtype": "BF16", "shape": [-1, 4], "data_offsets": [0, 8]},
        {"dtype": "BF16", "shape": [4], "data_offsets": [8, 0]},
        {"dtype": "BF16", "shape": [2**60], "data_offsets": [0, 8]},
        {"dtype": "BF16", "shape": [1.5], "data_offsets": [0, 8]},
        {"dtype": 5, "shape": [4], "data_offsets": [0, 8]},
    ):
        path.write_bytes(header(entry))
        with pytest.raises(CheckpointError, match="malformed entry"):
            read_header(path)
    path.write_bytes(header({"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]}))
    assert read_header(path)[0].nbytes == 8
