"""EXL3-TR3 layouts: FIELD-NOTES' published byte counts, config.json with a tier bitmap, and
the real safetensors bytes of a layout the test writes."""

import json

import numpy as np
import pytest
from safetensors.numpy import save_file

from launcher.errors import ProfileError
from launcher.plan.checkpoint import iter_tensors
from launcher.plan.exl3_layout import BF16, Exl3Layout, LayoutError, from_config, from_spec
from launcher.profile import load_profile
from tests.conftest import gathered

H, INTER = 6144, 2048  # GLM-5.2 hidden and expert intermediate


def layout(rotation: str, tp: int = 4) -> Exl3Layout:
    return Exl3Layout(rotation, tp, {}, "test")


def test_expert_bytes_are_the_published_figures():
    assert layout("per_expert_v1").expert_bytes(3, H, INTER) == 14_315_568
    assert layout("shared_h_v1").expert_bytes(3, H, INTER) == 14_168_112
    assert layout("shared_h_v1").expert_bytes(4, H, INTER) == 18_886_704
    assert layout("shared_h_v1").shared_block_bytes(H) == 147_456
    assert layout("per_expert_v1").shared_block_bytes(H) == 0
    assert layout("shared_h_v1").expert_bytes(BF16, H, INTER) == 3 * H * INTER * 2


def test_shared_h_saves_about_672_mib_per_gpu():
    """75 MoE layers of 256 experts, per rank (FIELD-NOTES: about 672 MiB)."""
    per_layer = 256 * (
        layout("per_expert_v1").expert_bytes(3, H, INTER)
        - layout("shared_h_v1").expert_bytes(3, H, INTER)
    ) - layout("shared_h_v1").shared_block_bytes(H)
    assert round(75 * per_layer / 4 / 2**20) == 672


def test_mixed_config_reads_the_tier_bitmap(tmp_path):
    ks = {str(layer): [4] * 100 + [3] * 156 for layer in (3, 4)}
    (tmp_path / "tier_bitmap.json").write_text(json.dumps({"k": ks}))
    block = {
        "format": "exl3_tr3",
        "tp": 4,
        "bits": "mixed",
        "k_values": [3, 4],
        "bits_per_expert": "tier_bitmap.json:k",
        "rotation_layout": "shared_h_v1",
        "moe_layers": [3, 4],
    }
    got = from_config(block, tmp_path, layers=[3, 4, 5], experts=256)
    assert got.tiers == {3: {4: 100, 3: 156}, 4: {4: 100, 3: 156}, 5: {BF16: 256}}
    assert got.rotation == "shared_h_v1" and got.source == "config.json"
    assert got.mean_bits([3, 4]) == pytest.approx((100 * 4 + 156 * 3) / 256)


def test_uniform_config_and_errors(tmp_path):
    got = from_config({"bits": 3, "moe_layers": "3-4"}, None, layers=[3, 4], experts=8)
    assert got.tiers == {3: {3: 8}, 4: {3: 8}} and got.rotation == "per_expert_v1"
    with pytest.raises(LayoutError, match="tier bitmap has no 8 K values"):
        (tmp_path / "t.json").write_text(json.dumps({"k": {"3": [3, 4]}}))
        from_config(
            {"bits": "mixed", "bits_per_expert": "t.json:k"}, tmp_path, layers=[3], experts=8
        )
    with pytest.raises(LayoutError, match="unknown rotation layout"):
        from_config({"bits": 3, "rotation_layout": "v9"}, None, layers=[3], experts=8)
    with pytest.raises(LayoutError, match="count 7 experts"):
        from_spec({"experts": {"default": {3: 7}}}, layers=[3], experts=8, source="catalog")


def write_shared_h(path, tiers: dict[int, dict[int, int]], hidden: int, inter: int, tp: int):
    """Expert tensors as a shared_h_v1 checkpoint stores them (what the layout must size)."""
    t: dict[str, np.ndarray] = {}
    s = inter // tp
    for layer, ks in tiers.items():
        e = 0
        for k, n in ks.items():
            for _ in range(n):
                for r in range(tp):
                    p = f"model.layers.{layer}.mlp.experts.{e}"
                    for proj, (i, o) in {"gate_proj": (hidden, s), "up_proj": (hidden, s)}.items():
                        t[f"{p}.{proj}.rank{r}.trellis"] = np.zeros(
                            (i // 16, o // 16, 16 * k), np.int16
                        )
                        t[f"{p}.{proj}.rank{r}.svh"] = np.zeros((o,), np.float16)
                        t[f"{p}.{proj}.rank{r}.mcg"] = np.zeros((), np.int32)
                    t[f"{p}.down_proj.rank{r}.trellis"] = np.zeros(
                        (s // 16, hidden // 16, 16 * k), np.int16
                    )
                    t[f"{p}.down_proj.rank{r}.suh"] = np.zeros((s,), np.float16)
                    t[f"{p}.down_proj.rank{r}.mcg"] = np.zeros((), np.int32)
                e += 1
        for r in range(tp):  # one block per layer: gate/up suh and down svh along hidden
            for name in ("gate_proj.suh", "up_proj.suh", "down_proj.svh"):
                t[f"model.layers.{layer}.mlp.experts.shared.{name}.rank{r}"] = np.zeros(
                    (hidden,), np.float16
                )
    path.mkdir(parents=True, exist_ok=True)
    save_file(t, str(path / "experts.safetensors"))


def test_layout_bytes_equal_real_safetensors(tmp_path):
    tiers = {1: {3: 3, 4: 1}, 2: {3: 4}}
    write_shared_h(tmp_path, tiers, hidden=64, inter=64, tp=2)
    real = sum(t.nbytes for t in iter_tensors(tmp_path))
    lay = Exl3Layout("shared_h_v1", 2, tiers, "test")
    assert lay.layer_bytes(1, 64, 64) + lay.layer_bytes(2, 64, 64) == real


def glm_config(tmp_path, block: dict) -> None:
    from launcher.plan.catalog import architecture_config

    cfg = {**architecture_config("glm-5.2"), "hybrid_tr3_tail": block}
    (tmp_path / "config.json").write_text(json.dumps(cfg))


PROFILE = """\
extends: {glm52}
model: {{path: {path}, checkpoint: null}}
vllm: {{extra_args: [--load-format, dummy]}}
"""


def test_local_config_sizes_weights_like_the_catalog(tmp_path, write):
    """A local GLM-5.2 directory with only config.json + tier bitmap, served with random
    weights (--load-format dummy), gives the 3.42 bpw checkpoint's catalog figure, labelled
    an estimate (no checkpoint was read)."""
    from tests.conftest import PROFILES

    ks = {str(i): [4] * 108 + [3] * 148 for i in range(4, 78)}
    ks["3"] = [4] * 50 + [3] * 206
    ks["78"] = [3] * 256
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "tier_bitmap.json").write_text(json.dumps({"k": ks}))
    block = {"tp": 4, "bits": "mixed", "bits_per_expert": "tier_bitmap.json:k"}
    glm_config(tmp_path / "ckpt", {**block, "rotation_layout": "shared_h_v1"})
    local = write("l.yaml", PROFILE.format(glm52=PROFILES / "glm52.yaml", path=tmp_path / "ckpt"))
    got = gathered(load_profile(local))
    catalog = gathered(load_profile(PROFILES / "glm52.yaml"))
    assert got.weights_source == "estimate" and catalog.weights_source == "catalog"
    assert "--load-format dummy: random weights" in got.weights_detail
    assert got.weights == catalog.weights
    assert "MTP layer 256 K3" in got.weights_detail and "shared_h_v1" in got.weights_detail


def test_a_bad_tier_bitmap_is_a_profile_error(tmp_path, write):
    from tests.conftest import PROFILES

    (tmp_path / "ckpt").mkdir()
    glm_config(tmp_path / "ckpt", {"tp": 4, "bits": "mixed", "bits_per_expert": "missing.json:k"})
    local = write("l.yaml", PROFILE.format(glm52=PROFILES / "glm52.yaml", path=tmp_path / "ckpt"))
    with pytest.raises(ProfileError, match="hybrid_tr3_tail: cannot read"):
        gathered(load_profile(local))
