"""Which profile keys matter to what: the fingerprint, the deployment and the gathered facts.

The fingerprints of the shipped profiles are pinned: they key every calibration record, qualified
record and cache artifact a deployment has, so a change to how keys are hashed would orphan them.
"""

from __future__ import annotations

import pytest

from launcher.plan.fingerprint import profile_fingerprint
from launcher.profile import load_profile
from tests.conftest import PROFILES

SHIPPED = {
    "deepseek-v32.yaml": "72184d2cd6ca",
    "glm52-2node.yaml": "8b1607ac6c76",
    "glm52-dcp1.yaml": "705524dd8196",
    "glm52-dcp2.yaml": "ae885d405aef",
    "glm52.yaml": "3928e3a0ff8c",
    "kimi-k2.yaml": "aed97a72c6bd",
    "tiny-cpu.yaml": "a9ce37d1ef97",
}
"""Each shipped profile's fingerprint, computed before the keys' dependence moved onto the
schema's fields (main at 3141fa7)."""


def test_every_shipped_profile_is_pinned():
    assert sorted(SHIPPED) == sorted(p.name for p in PROFILES.glob("*.yaml"))


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_the_shipped_profiles_keep_their_fingerprints(name):
    assert profile_fingerprint(load_profile(PROFILES / name).profile) == SHIPPED[name]


IGNORED_SETTINGS = (
    "name=other",
    "description=another text",
    "model.served_name=other",
    "serving.host=127.0.0.1",
    "serving.port=9001",
    "runtime.cache_root=/elsewhere",
    "runtime.run_dir=/elsewhere/runs",
    "prewarm.strict_jit=true",
    "hardware.reserved_by_others=3GiB",
    "qualify.concurrency=2",
    "qualify.max_seconds=10",
)
"""One setting of each key the fingerprint ignores (labels, where it listens or keeps its
files, whether a late compile is fatal, the cards' other processes, qualify's workload)."""


@pytest.mark.parametrize("setting", IGNORED_SETTINGS)
def test_an_ignored_key_keeps_the_fingerprint(setting):
    loaded = load_profile(PROFILES / "glm52.yaml", [setting])
    assert profile_fingerprint(loaded.profile) == SHIPPED["glm52.yaml"]


@pytest.mark.parametrize(
    "setting",
    [
        "serving.max_num_seqs=4",
        "serving.max_model_len=65536",
        "memory.safety_margin=1GiB",
        "prewarm.autotune=true",
        "hardware.memory=90GiB",
        "parallel.interleave=2",
        "vllm.extra_args=[--max-logprobs, '5']",
    ],
)
def test_a_key_that_changes_memory_or_code_changes_the_fingerprint(setting):
    loaded = load_profile(PROFILES / "glm52.yaml", [setting])
    assert profile_fingerprint(loaded.profile) != SHIPPED["glm52.yaml"]
