"""The container tier: the real Dockerfile, built on a stand-in vLLM base, run by a Docker engine.

Skipped when no engine can be started (Debian: ``apt-get install -y docker.io debootstrap``,
then run as root; the tier starts ``dockerd`` itself). The stand-in base is built once and
kept by tag (``tests/container/standin.py``); the images of the project are rebuilt each run
(the classic builder's layer cache makes that quick when nothing changed).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from tests.conftest import ROOT, need, need_module
from tests.container.engine import docker, ensure_engine

IMAGE_REPO = "b12x-launch-test/image"


def _asked_for(config) -> bool:
    """The tier runs when named (a path under tests/container, or ``-m container``)."""
    named = any("tests/container" in str(Path(a).resolve()) for a in config.args)
    return named or "container" in (config.getoption("markexpr", "") or "")


def pytest_collection_modifyitems(config, items):
    # Tens of minutes cold and a root Docker engine: not part of a plain `tests/run`.
    skip = pytest.mark.skip(reason="the container tier runs when asked: tests/run tests/container")
    asked = _asked_for(config)
    for item in items:
        if "tests/container" in str(item.fspath):
            item.add_marker(pytest.mark.container)
            if not asked:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def engine() -> None:
    why = ensure_engine()
    need("container", why is None, f"no Docker engine: {why}")


@pytest.fixture(scope="session")
def standin(engine) -> str:
    from tests.container.standin import ensure_standin

    return ensure_standin()


def build_image(tag: str, base: str, *build_args: str) -> str:
    """The project's Dockerfile on ``base``; returns the build's output."""
    args = [a for kv in build_args for a in ("--build-arg", kv)]
    out = docker(
        "build", "-t", tag, "--build-arg", f"VLLM_IMAGE={base}", *args, str(ROOT), timeout=1800
    )
    return out.stdout


@pytest.fixture(scope="session")
def image(standin) -> str:
    tag = f"{IMAGE_REPO}:epoch1"
    build_image(tag, standin)
    return tag


@pytest.fixture(scope="session")
def rebuilt_image(standin, image) -> str:
    """The same Dockerfile and base with another cache epoch: another build id."""
    tag = f"{IMAGE_REPO}:epoch2"
    build_image(tag, standin, "BLAUNCH_CACHE_EPOCH=2")
    return tag


@pytest.fixture(scope="session")
def shared_tmp() -> Path:
    """A directory the container's user (uid 10001) can read: pytest's own are mode 0700."""
    path = Path(tempfile.mkdtemp(prefix="blaunch-container-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def tiny_model(shared_tmp) -> Path:
    """The integration tier's tiny Llama, written on the host (needs torch and tokenizers)."""
    need_module("container", "torch", "the tiny model is written with torch (tests/run)")
    need_module("container", "tokenizers", "the tiny model's tokenizer (tests/run)")
    from tests.integration.tinymodel import write_tiny_llama

    path = write_tiny_llama(shared_tmp / "tiny-llama")
    for p in [path, *path.iterdir()]:
        p.chmod(0o755 if p.is_dir() else 0o644)
    return path


@pytest.fixture(scope="session")
def cache_volume(engine) -> str:
    name = f"blaunch-test-cache-{uuid.uuid4().hex[:8]}"
    docker("volume", "create", name)
    yield name
    with contextlib.suppress(Exception):
        docker("volume", "rm", "-f", name, check=False)


@pytest.fixture
def container_name(engine) -> str:
    """A name for one container; removed (forcibly) after the test."""
    name = f"blaunch-test-{uuid.uuid4().hex[:8]}"
    yield name
    docker("rm", "-f", name, check=False)


def host_launcher() -> list[str]:
    """``b12x-launch`` on the host, as this interpreter runs it."""
    return [sys.executable, "-m", "launcher"]


def host_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}
