"""The container files, read without a Docker engine: Dockerfile and the GLM-5.2 compose file.

A small Dockerfile parser (instructions, ARG substitution, ENV, JSON and shell forms,
HEALTHCHECK options) is enough to check what the image promises.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from dataclasses import dataclass, field

import pytest
import yaml

from launcher.contract.runfile import ENV_PREFIX
from tests.conftest import PROFILES, ROOT

DOCKERFILE = ROOT / "Dockerfile"
COMPOSE = ROOT / "deploy" / "compose.glm52.yaml"
ENTRYPOINT_SH = ROOT / "docker" / "entrypoint.sh"

# b12x hashes these into its compile-cache key: the image must set none of them.
FORBIDDEN_PREFIXES = ("B12X_", "CUTE_", "CUTLASS_")


# --- a tiny Dockerfile parser ------------------------------------------------------------


@dataclass
class Instruction:
    keyword: str
    args: str
    line: int

    def exec_form(self) -> list[str] | None:
        """The JSON (exec) form's list, or None for the shell form."""
        text = self.args.strip()
        if not text.startswith("["):
            return None
        value = json.loads(text)
        assert isinstance(value, list) and all(isinstance(v, str) for v in value)
        return value


@dataclass
class Dockerfile:
    instructions: list[Instruction]
    global_args: dict[str, str] = field(default_factory=dict)
    """ARGs before the first FROM, with their defaults."""
    stage_args: dict[str, str] = field(default_factory=dict)
    """ARGs of the (last) stage, defaults resolved."""

    def all(self, keyword: str) -> list[Instruction]:
        return [i for i in self.instructions if i.keyword == keyword]

    def last(self, keyword: str) -> Instruction:
        found = self.all(keyword)
        assert found, f"no {keyword} instruction"
        return found[-1]

    def expand(self, text: str, scope: dict[str, str] | None = None) -> str:
        scope = self.stage_args if scope is None else scope

        def sub(m: re.Match) -> str:
            name = m.group(1) or m.group(2)
            return scope.get(name, "")

        return re.sub(r"\$\{(\w+)\}|\$(\w+)", sub, text)

    def env(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for inst in self.all("ENV"):
            out.update(parse_env(inst.args))
        return out

    def base_image(self) -> str:
        return self.expand(self.last("FROM").args.split()[0], self.global_args)


def logical_lines(text: str) -> list[tuple[int, str]]:
    """Join continuation lines; drop comments and blank lines. Returns (first line, text)."""
    out: list[tuple[int, str]] = []
    buf: list[str] = []
    start = 0
    for n, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not buf):
            continue
        if not buf:
            start = n
        if stripped.endswith("\\"):
            buf.append(stripped[:-1].strip())
            continue
        buf.append(stripped)
        out.append((start, " ".join(b for b in buf if b)))
        buf = []
    if buf:
        out.append((start, " ".join(buf)))
    return out


def parse_dockerfile(text: str) -> Dockerfile:
    instructions = []
    for line, joined in logical_lines(text):
        keyword, _, args = joined.partition(" ")
        instructions.append(Instruction(keyword.upper(), args.strip(), line))
    df = Dockerfile(instructions)
    seen_from = False
    for inst in instructions:
        if inst.keyword == "FROM":
            seen_from = True
            df.stage_args = {}
        elif inst.keyword == "ARG":
            name, _, default = inst.args.partition("=")
            if not seen_from:
                df.global_args[name] = default
            elif default:
                df.stage_args[name] = df.expand(default)
            else:  # re-declared global ARG: its default comes in
                df.stage_args[name] = df.global_args.get(name, "")
    return df


def parse_env(args: str) -> dict[str, str]:
    """``ENV a=1 b="2 3"`` or the legacy ``ENV a 1``."""
    words = shlex.split(args)
    if words and "=" not in words[0]:
        return {words[0]: " ".join(words[1:])}
    return dict(w.split("=", 1) for w in words)


def parse_options(args: str) -> tuple[dict[str, str], str]:
    """Leading ``--key=value`` options of HEALTHCHECK and the rest."""
    opts = {}
    rest = args
    while rest.startswith("--"):
        word, _, rest = rest.partition(" ")
        key, _, value = word[2:].partition("=")
        opts[key] = value
        rest = rest.strip()
    return opts, rest


def duration_seconds(text: str) -> float:
    """Docker's durations: ``30s``, ``30m``, ``1h30m``, ``500ms``."""
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    parts = re.findall(r"([\d.]+)(ms|s|m|h)", text)
    assert parts and "".join(a + b for a, b in parts) == text, f"bad duration {text!r}"
    return sum(float(n) * units[u] for n, u in parts)


@pytest.fixture(scope="module")
def df() -> Dockerfile:
    return parse_dockerfile(DOCKERFILE.read_text())


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


@pytest.fixture(scope="module")
def service(compose) -> dict:
    services = compose["services"]
    assert len(services) == 1
    return next(iter(services.values()))


# --- the parser itself ---------------------------------------------------------------------


def test_parser_reads_forms_and_substitutes_args():
    text = (
        "ARG IMG=base:1\nFROM ${IMG}\nARG IMG\nARG U=7\n# comment\n"
        'ENV A=1 B="two words" \\\n    C=3\nENV LEGACY value here\n'
        "USER ${U}:${U}\n"
        "HEALTHCHECK --interval=5s --start-period=1h30m CMD curl -f http://x/health\n"
        'ENTRYPOINT ["tini", "--", "run"]\nCMD run --flag\n'
    )
    d = parse_dockerfile(text)
    assert d.base_image() == "base:1"
    assert d.env() == {"A": "1", "B": "two words", "C": "3", "LEGACY": "value here"}
    assert d.expand(d.last("USER").args) == "7:7"
    opts, rest = parse_options(d.last("HEALTHCHECK").args)
    assert duration_seconds(opts["start-period"]) == 5400 and rest.startswith("CMD curl")
    assert d.last("ENTRYPOINT").exec_form() == ["tini", "--", "run"]
    assert d.last("CMD").exec_form() is None
    assert [i.line for i in d.all("ENV")] == [6, 8]


# --- the Dockerfile ---------------------------------------------------------------------


def test_base_is_the_pinned_vllm_image(df):
    assert df.last("FROM").args.split()[0].startswith("${"), "the base image is an ARG"
    image = df.base_image()
    assert image == "vllm/vllm-openai:v0.32.0"
    # the image's release is inside the range the serve extra and the launch accept
    from launcher.launch.preflight import vllm_outside_support

    pyproject = (ROOT / "pyproject.toml").read_text()
    low, high = re.search(r'"vllm>=([\d.]+),<([\d.]+)"', pyproject).groups()
    assert vllm_outside_support(image.split(":v")[1]) is None
    assert (low, high) == ("0.26", "0.34")


def test_installs_b12x_pin_and_the_package(df):
    run = " ".join(df.expand(i.args) for i in df.all("RUN"))
    assert "b12x==1.5.1" in run
    assert "nvidia-ml-py" in run and "dumb-init==" in run
    assert "/tmp/b12x-launch-src" in run, "the package itself is installed"
    assert "write_constraints" in run, "the base image's vLLM/torch stay pinned"
    assert "write_build_info('/opt/b12x-launch/build.json')" in run
    assert df.env()["BLAUNCH_BUILD_INFO"] == "/opt/b12x-launch/build.json"


def test_entrypoint_runs_init_then_entrypoint_script(df):
    entry = df.last("ENTRYPOINT").exec_form()
    assert entry is not None, "exec form, so the init process is PID 1"
    assert entry[0] in ("dumb-init", "tini", "/usr/bin/tini", "/usr/local/bin/dumb-init")
    assert entry[-1] == "/opt/b12x-launch/entrypoint.sh"
    copies = [df.expand(i.args).split() for i in df.all("COPY")]
    assert ["docker/entrypoint.sh", "/opt/b12x-launch/entrypoint.sh"] in copies
    cmd = df.last("CMD").exec_form()
    assert cmd is not None, "CMD holds b12x-launch's arguments in exec form"


def test_entrypoint_script_is_a_small_exec_wrapper():
    text = ENTRYPOINT_SH.read_text()
    assert text.startswith("#!/bin/sh\n")
    code = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert code == ['exec python3 -m launcher.entrypoint "$@"']
    assert os.access(ENTRYPOINT_SH, os.X_OK)
    assert subprocess.run(["sh", "-n", str(ENTRYPOINT_SH)]).returncode == 0


def test_copied_sources_exist(df):
    for inst in df.all("COPY"):
        if "--from=" in inst.args:  # from another stage, not the build context
            continue
        words = [w for w in df.expand(inst.args).split() if not w.startswith("--")]
        for src in words[:-1]:
            assert (ROOT / src).exists(), f"Dockerfile:{inst.line} copies missing {src}"


def test_cache_volume_and_env(df):
    volumes = [v for i in df.all("VOLUME") for v in (i.exec_form() or i.args.split())]
    assert "/cache" in volumes
    env = df.env()
    assert env["BLAUNCH_CACHE_MOUNT"] == "/cache"
    assert "/opt/b12x-launch/profiles" in env["BLAUNCH_PROFILE_DIRS"].split(":")


def test_no_variable_in_b12x_compile_key(df):
    names = list(df.env()) + list(df.global_args) + list(df.stage_args)
    bad = [n for n in names if n.startswith(FORBIDDEN_PREFIXES)]
    assert not bad, f"b12x would hash these into its compile-cache key: {bad}"
    ours = [n for n in names if n.startswith("BLAUNCH")]
    assert all(n.startswith(ENV_PREFIX) for n in ours)


def test_healthcheck_targets_health_with_long_start_period(df):
    opts, rest = parse_options(df.last("HEALTHCHECK").args)
    assert rest.startswith("CMD ")
    assert "/health" in rest and "BLAUNCH_PORT" in rest and "'8000'" in rest
    assert duration_seconds(opts["start-period"]) >= 20 * 60
    assert duration_seconds(opts["timeout"]) < duration_seconds(opts["interval"])


def test_runs_as_a_fixed_non_root_user(df):
    user = df.expand(df.last("USER").args)
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) != 0, "a numeric, non-root uid (runAsNonRoot can check)"
    assert gid.isdigit() and int(gid) != 0
    run = " ".join(df.expand(i.args) for i in df.all("RUN"))
    assert f'chown "{uid}:{gid}" /cache' in run or f"chown {uid}:{gid} /cache" in run
    # The VOLUME comes after the chown, or a new volume would not inherit the owner.
    order = [i.keyword for i in df.instructions]
    chown_at = max(
        n for n, i in enumerate(df.instructions) if i.keyword == "RUN" and "/cache" in i.args
    )
    assert chown_at < order.index("VOLUME")


def test_exposes_the_profile_port(df):
    ports = [p for i in df.all("EXPOSE") for p in i.args.split()]
    glm = yaml.safe_load((PROFILES / "glm52.yaml").read_text())
    assert str(glm.get("serving", {}).get("port", 8000)) in ports


# --- the compose file ----------------------------------------------------------------------


def test_compose_mounts_models_and_cache(service, compose):
    volumes = service["volumes"]
    assert "cache:/cache" in volumes
    assert "models:/models:ro" in volumes
    assert {"models", "cache"} <= set(compose["volumes"])


def test_compose_reserves_four_gpus(service):
    devices = service["deploy"]["resources"]["reservations"]["devices"]
    assert len(devices) == 1
    dev = devices[0]
    assert "gpu" in dev["capabilities"]
    assert dev.get("count") == 4 or len(dev.get("device_ids", [])) == 4
    glm = yaml.safe_load((PROFILES / "glm52.yaml").read_text())
    assert glm["hardware"]["count"] == 4


def test_compose_ipc_shm_ulimits(service):
    assert service["ipc"] == "host"
    assert service["shm_size"]
    ulimits = service["ulimits"]
    memlock = ulimits["memlock"]
    assert memlock == -1 or memlock == {"soft": -1, "hard": -1}
    assert ulimits["stack"] == 67108864


def test_compose_port_health_and_lifecycle(service):
    assert "8000:8000" in service["ports"]
    hc = service["healthcheck"]
    assert hc["test"][0] in ("CMD", "CMD-SHELL")
    assert "/health" in " ".join(hc["test"][1:])
    assert duration_seconds(hc["start_period"]) >= 20 * 60
    assert duration_seconds(service["stop_grace_period"]) >= 30
    assert service["restart"] in ("unless-stopped", "always", "on-failure")


def test_compose_command_names_a_shipped_profile(service):
    profile = service["command"][0]
    assert (ROOT / profile).is_file()
    data = yaml.safe_load((ROOT / profile).read_text())
    assert data["model"]["path"].startswith("/models/"), "the checkpoint is on the models volume"


def test_compose_sets_no_variable_in_b12x_compile_key(service):
    env = service.get("environment", {})
    names = list(env) if isinstance(env, dict) else [e.split("=", 1)[0] for e in env]
    assert not [n for n in names if n.startswith(FORBIDDEN_PREFIXES)]


# --- which base serves which profile --------------------------------------------------------


def test_the_default_base_is_the_entrypoints_upstream_image(df):
    from launcher.entrypoint import upstream_image

    assert df.base_image() == upstream_image()


def test_compose_builds_glm52_on_the_fork_image(compose, service):
    """The shipped GLM-5.2 profile needs EXL3 and B12X_MLA_SPARSE: only the fork has them."""
    from launcher.entrypoint import fork_image
    from launcher.vllm.lines import VLLM_LINES, fallback, lines_with

    assert service["build"]["args"]["VLLM_IMAGE"] == fork_image()
    glm = yaml.safe_load((ROOT / service["command"][0]).read_text())
    fork = next(line for line in VLLM_LINES.values() if line.image == fork_image())
    for key in ("model.quantization", "vllm.attention_backend"):
        section, name = key.split(".")
        having = lines_with(key, glm[section][name])
        assert fork in having and fallback() not in having, key


def test_docs_name_the_base_of_every_shipped_profile():
    from launcher.entrypoint import fork_image, upstream_image

    ops = (ROOT / "docs" / "operations.md").read_text()
    table = ops[ops.index("### Which base") :]
    table = table[: table.index("\n\n", table.index("|---"))]
    assert fork_image() in table and upstream_image() in table
    for profile in PROFILES.glob("*.yaml"):
        assert f"`{profile.name}`" in table, (
            f"docs/operations.md does not name {profile.name}'s base"
        )
    assert fork_image() in DOCKERFILE.read_text()
