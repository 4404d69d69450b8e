"""The GPU tier's deployment generator, on the CPU: seeded, accepted by the launcher, and over
the whole space (every axis reaches each of its values over a few seeds)."""

from __future__ import annotations

import random

from tests.conftest import need_serving

# The generator writes each model's tokenizer with `tokenizers`, which vLLM brings (the
# integration tier's packages): TEST_TIER=unit does not install it.
need_serving("tokenizers")

from tests.gpu import matrix  # noqa: E402  (after the tier check: it imports tokenizers' users)


def test_the_same_seed_gives_the_same_deployments_and_another_seed_others():
    a, b = matrix.generate(7, 6), matrix.generate(7, 6)
    assert a == b
    assert [g.sets for g in matrix.generate(8, 6)] != [g.sets for g in a]


def test_every_generated_deployment_is_one_the_launcher_accepts(tmp_path):
    for g in matrix.generate(3, 8, tmp_path):
        assert matrix.accepted(g.model, g.sets, tmp_path) is None, g.describe()


def test_a_deployment_the_launcher_refuses_is_never_generated(tmp_path):
    """The filter is the launcher's own: capture sizes below max_num_seqs x (1 + MTP) fail."""
    bad = (
        "serving.max_num_seqs=8",
        "serving.cudagraph_capture_sizes=[3]",
        "speculative={method: mtp, tokens: 2}",
    )
    assert matrix.accepted("glm_dsa", bad, tmp_path)


def test_half_the_deployments_or_more_are_glm_and_every_tier_model_is_drawn():
    models = [g.model for g in matrix.generate(11, 8)]
    assert models.count("glm_dsa") >= 4
    assert set(models) == set(matrix.PROFILES)


def test_each_axis_reaches_each_of_its_values():
    rng = random.Random(0)
    seen: dict[str, set[str]] = {}
    for _ in range(600):
        for model in matrix.PROFILES:
            for pair in matrix.draw(rng, model):
                key, _, value = pair.partition("=")
                seen.setdefault(f"{model}:{key}", set()).add(value)
    spec = {v for v in seen["glm_dsa:speculative"]}
    assert spec == {f"{{method: mtp, tokens: {n}}}" for n in (1, 2, 3, 4)}
    assert seen["glm_dsa:serving.cudagraph_mode"] == set(matrix.MODES)
    assert seen["llama:serving.block_size"] == {"16", "32", "64"}
    assert seen["deepseek_v2:serving.kv_cache_dtype"] == {"auto", "fp8"}
    assert {str(n) for n in matrix.SEQS} == seen["llama:serving.max_num_seqs"]
    assert "auto" in seen["glm_dsa:serving.cudagraph_capture_sizes"]


def test_each_deployment_names_the_command_that_boots_it_again():
    g = matrix.generate(5, 2)[1]
    assert g.command() == (
        f'GPU_MATRIX_SEED=5 tests/gpu/run-tier.sh tests/gpu/test_matrix.py -k "{g.name}"'
    )
    assert g.spec().cache == g.name and g.spec(plain=True).plain


def test_a_row_and_its_second_boot_serve_the_users_traffic_of_the_matrix_seed(monkeypatch):
    """The row's command sends the same requests again: its seed is the matrix's unless
    ``GPU_TIER_SEED`` names one."""
    from tests.gpu.stress import Workload, users_seed

    g = matrix.generate(5, 2)[1]
    for spec in (g.spec(), g.spec(plain=True), g.again()):
        assert (spec.workload, spec.seed) == ("users", 5), spec
    assert g.again().cache == g.name and g.again().name == g.name + "-again"
    w = Workload("http://127.0.0.1:1", "tier", 4096, 4, 1000, seed=g.spec().seed)
    monkeypatch.delenv("GPU_TIER_SEED", raising=False)
    assert users_seed(w) == 5
    monkeypatch.setenv("GPU_TIER_SEED", "11")
    assert users_seed(w) == 11
