"""The GPU tier's artifact boots (tests/gpu/test_artifact_boot.py), on the CPU: the baked and
the fresh node plan one deployment (one fingerprint: the artifact fits), the artifact lies
outside every cache root (bake refuses one inside), and the fresh node's launch names it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import need_serving

# The tier writes each model's tokenizer with `tokenizers` (the integration tier's packages).
need_serving("tokenizers")

from launcher import pipeline  # noqa: E402
from tests.gpu.boot import PROFILES, Lab  # noqa: E402
from tests.gpu.test_artifact_boot import MODELS, SPECS  # noqa: E402


def _lab(tmp_path: Path) -> Lab:
    return Lab(root=tmp_path, models=tmp_path / "models", cache=tmp_path / "cache", devices=[0])


def _fingerprint(lab: Lab, spec, port: int) -> str:
    sets = lab.sets(spec, port)
    overrides = tuple(sets[i + 1] for i in range(0, len(sets), 2))
    loaded = pipeline.load(str(PROFILES / spec.profile), overrides, force=True)
    return pipeline.make_plan(loaded).fingerprint


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_baked_and_the_fresh_node_plan_one_deployment(tmp_path, name):
    lab, specs = _lab(tmp_path), SPECS[name]
    baked = _fingerprint(lab, specs["baked"], 8001)
    for port, fresh in enumerate(("fresh", "fresh-2", "fresh-traced"), 8002):
        assert _fingerprint(lab, specs[fresh], port) == baked  # another port and cache root
    assert _fingerprint(lab, specs["baked-again"], 8009) == baked


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_fresh_node_launches_with_the_artifact_outside_every_cache_root(tmp_path, name):
    lab, fresh = _lab(tmp_path), SPECS[name]["fresh"]
    argv = lab.argv(fresh, 8000, tmp_path / "run")
    art = Path(argv[argv.index("--cache-from") + 1])
    assert art == lab.artifact(f"{name}-art")
    for spec in SPECS[name].values():
        assert not art.is_relative_to(lab.cache_root(spec)), spec.name
    assert "--cache-from" not in lab.argv(SPECS[name]["baked"], 8000, tmp_path / "run")
