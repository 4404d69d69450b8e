"""The generated part of the hostile corpus: cases derived from what each subcommand takes.

Every parameter of every subcommand, read from click's command tree, has a role by its type
and name: a profile it reads, a run directory it reads, a file it reads, a tree it writes, a
string, a number, a choice. Each role has its hostile values: paths with ``..``, absolute paths
out of the case, links at the top and below, FIFOs and devices, files past every reader's
limit, damaged and bomb archives, records of foreign plans and ranks, terminal escapes, and
secrets of every shape (by name, JSON or YAML in a value, a URL's userinfo). A case is one
subcommand with valid values everywhere but in one place, which takes one hostile value; the
seed picks the valid rest (the shipped profile, the subcommand's mode) and the order.

``{s}`` in a case's strings is its sentinel tree (a sibling of its directory that nothing may
change), ``{sname}`` its name. ``owned`` lists the trees under the case's directory the
launcher may write (new entries only, unless ``all_owned``).
"""

from __future__ import annotations

import gzip
import io
import json
import random
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import click

from launcher.artifact.manifest import VERSION
from launcher.contract.base import JSON_MAX
from launcher.contract.qualified import RECORD_MAX
from launcher.emit.manifest import MANIFEST, MANIFEST_MAX
from launcher.profile.yamlsource import PROFILE_MAX

SECRET = "PLANTEDxSECRETx5e1f"
"""Every planted secret carries this; found in an output or a written file, it leaked."""
FIFO = object()
"""A file entry that is a named pipe (nothing ever writes to it)."""


@dataclass(frozen=True)
class Link:
    target: str


@dataclass(frozen=True)
class Sparse:
    """A file of ``size`` bytes, ``head`` first and zeros after (sparse: no disk taken)."""

    size: int
    head: bytes = b""


@dataclass(frozen=True)
class Generated:
    name: str
    family: str
    """What it derives from (``secret/profile-env``, ``path/profile/link-top``, ...): the
    unit the corpus reports and marks."""
    argv: tuple[str, ...]
    files: dict[str, object] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    expect: str = "any"
    owned: tuple[str, ...] = (".cache", "cache", "out", "art", "run", "plot.svg", "plot.png")
    """Trees the launcher may add to (relative to the case's directory)."""

    @property
    def command(self) -> str:
        for word in self.argv:
            if word in COMMANDS:
                return word
        return "launch"


def _commands() -> tuple[str, ...]:
    from launcher.cli import cli

    return tuple(cli.commands)


COMMANDS = _commands()
"""Every subcommand, read from click's command tree: a new one is in the corpus by itself."""
S = SECRET
SHAPES: list[tuple[str, str]] = [
    ("GITHUB_PAT", f"ghp_{S}"),
    ("GH_PAT", S),
    ("DEPLOY_PAT", S),
    ("HF_TOKEN", S),
    ("VLLM_API_KEY", S),
    ("DB_PASSWORD", S),
    ("AWS_SECRET_ACCESS_KEY", S),
    ("MY_CONFIG", json.dumps({"api_key": S})),
    ("MY_YAML", f"password: {S}"),
    ("NESTED_JSON", json.dumps({"outer": {"token": S}})),
    ("LIST_JSON", json.dumps([{"client_secret": S}])),
    ("HF_ENDPOINT", f"https://user:{S}@hf.example.com"),
    ("HTTPS_PROXY", f"http://bob:{S}@proxy.example.com:3128"),
    ("GIT_REMOTE", f"https://{S}@github.com/o/r.git"),
    ("BARE_PROXY", f"bob:{S}@proxy:3128"),
    ("CALLBACK", f"https://h.example.com/cb?access_token={S}"),
    ("DATABASE_URL", f"postgres://u:{S}@db.example.com/x"),
]
"""A secret of every shape: by its name, JSON or YAML holding a secret key, URL userinfo."""
URLS = [v for _, v in SHAPES if "://" in v or "@" in v]
ESCAPES = {
    "osc-title": "\x1b]0;pwned\x07",
    "csi-clear": "\x1b[2J\x1b[H",
    "c1-csi": "\x9b31m",
    "bidi": "\u202eevil\u202c",
    "bell-nul": "\x07\x00",
    "osc-link": "\x1b]8;;http://x/\x1b\\link\x1b]8;;\x1b\\",
}
PROFILES = {"glm": "{glm}", "tiny": "{tiny}", "two": "{two}", "kimi": "{kimi}"}
FP = "{fp}"
OTHER_FP = "fedcba987654"


def _yaml(value: str) -> str:
    return json.dumps(value)  # a JSON string is a YAML double-quoted scalar


def _tar(members: list[tuple[tarfile.TarInfo, bytes | None]], gz: bool = False) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz" if gz else "w") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def _member(name: str, data: bytes = b"x", kind: bytes = tarfile.REGTYPE, link: str = ""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    info.linkname = link
    return info, (data if kind == tarfile.REGTYPE else None)


def _artifact_manifest(files: list[dict], **keys: object) -> bytes:
    data = {
        "format": "b12x-launch/cache-artifact",
        "version": VERSION,
        "keys": {"fingerprint": "0" * 12, "gpu_kind": "cpu", "build_id": "x", **keys},
        "files": files,
    }
    return json.dumps(data).encode()


def _archives() -> dict[str, bytes]:
    """Damaged, hostile and bomb archives, each a ``.tar`` (or ``.tar.gz``) to restore."""
    entry = {"path": "triton/ab/k.json", "size": 16, "sha256": "0" * 64}
    manifest = _artifact_manifest([entry])
    whole = _tar([_member("manifest.json", manifest), _member("triton/ab/k.json", b"y" * 16)])
    bomb = gzip.compress(b"\0" * (8 << 20), 9)  # 8 MiB of zeros in a few KiB
    return {
        "truncated": whole[: len(whole) // 2],
        "not-a-tar": b"PK\x03\x04 not a tar at all",
        "empty": b"",
        "member-dotdot": _tar([_member("manifest.json", manifest), _member("../../victim.txt")]),
        "member-absolute": _tar([_member("manifest.json", manifest), _member("/tmp/x/victim")]),
        "member-symlink": _tar(
            [_member("manifest.json", manifest), _member("triton/ab/k.json", b"", b"2", "/etc")]
        ),
        "member-hardlink": _tar(
            [_member("manifest.json", manifest), _member("triton/ab/k.json", b"", b"1", "/etc")]
        ),
        "member-device": _tar(
            [_member("manifest.json", manifest), _member("triton/ab/k.json", b"", b"3")]
        ),
        "member-larger-than-listed": _tar(
            [_member("manifest.json", manifest), _member("triton/ab/k.json", b"z" * 4096)]
        ),
        "manifest-garbage": _tar([_member("manifest.json", b"{oops")]),
        "manifest-foreign-plan": _tar(
            [
                _member("manifest.json", _artifact_manifest([entry], fingerprint=OTHER_FP)),
                _member("triton/ab/k.json", b"y" * 16),
            ]
        ),
        "gzip-bomb": bomb,
        "tar-gz-bomb": _tar(
            [_member("manifest.json", manifest), _member("triton/ab/k.json", b"\0" * (4 << 20))],
            gz=True,
        ),
    }


# -- the roles, from click's command tree --------------------------------------------------


def roles(command: click.Command) -> dict[str, str]:
    """Each parameter's role, by its type and name: ``profile``, ``run``, ``read``, ``write``,
    ``set``, ``vary``, ``string``, ``number``, ``choice`` (flags have none)."""
    out: dict[str, str] = {}
    for p in command.params:
        opt = p.opts[0]
        if isinstance(p, click.Option) and p.is_flag:
            continue
        t = p.type
        if p.name in ("profile", "profiles"):
            out[opt] = "profile"
        elif p.name == "run_dir" and isinstance(p, click.Argument):
            out[opt] = "run"
        elif isinstance(t, click.Path) and t.exists:
            out[opt] = "read"
        elif isinstance(t, click.Path):
            out[opt] = "write"
        elif p.name == "overrides":
            out[opt] = "set"
        elif p.name == "vary":
            out[opt] = "vary"
        elif isinstance(t, click.Choice):
            out[opt] = "choice"
        elif isinstance(t, click.types._NumberParamTypeBase):
            out[opt] = "number"
        else:
            out[opt] = "string"
    return out


def _base(command: str, rng: random.Random, profile: str) -> list[str]:
    """A valid command line of ``command`` (the seed picks its mode)."""
    if command == "launch":
        mode = rng.choice([["--dry-run"], ["--json"], ["--print-command", "--run-dir", "{d}/run"]])
        return [profile, *mode]
    if command == "sweep":
        return [
            "sweep",
            profile,
            "--vary",
            "serving.max_num_seqs=1,2",
            *rng.choice([[], ["--json"]]),
        ]
    if command == "prewarm":
        return ["prewarm", profile, "--list"]
    if command == "bake":  # a CPU profile: no NVML to ask which cards baked it
        return ["bake", "{tiny}", "{d}/art", "--set", "runtime.cache_root={d}/cache"]
    if command == "emit":
        return ["emit", profile, "{d}/out"]
    if command == "qualify":  # one node, on GPUs this machine lacks: refused, naming them
        return ["qualify", "{glm}" if profile in ("{tiny}", "{two}") else profile]
    if command == "validate":
        return ["validate", profile]
    if command in ("report", "status"):
        return [command, "{d}/run", *(["--once"] if command == "status" else [])]
    return [command]


def _plan_json(fp: str = "0123456789ab", **over: object) -> str:
    comp = {"weights": {"bytes": 1 << 30, "source": "estimate"}}
    rank = {"rank": 0, "total_bytes": 8 << 30, "components": comp}
    data = {"fingerprint": fp, "ranks": [rank], "kv": {"tokens": 1000, "max_concurrency": 1.5}}
    return json.dumps({**data, **over})


def _record(**over: object) -> str:
    base = {
        "schema": "b12x-launch/measurement/1",
        "fingerprint": "0123456789ab",
        "rank": 0,
        "when": "2026-12-01",
        "environment": {"gpu_kind": "rtx-pro-6000"},
        "measured": {"jit_headroom": 1 << 20},
        "budget": {"bytes": 1 << 30, "basis": "plan"},
    }
    return json.dumps({**base, **over})


def _qualified(**over: object) -> str:
    base = {
        "schema": "b12x-launch/qualified/1",
        "fingerprint": FP,
        "when": "2026-12-01T00:00:00",
        "environment": {"gpu_kind": "rtx-pro-6000"},
        "kv": {"blocks": 100, "tokens": 6400},
    }
    return json.dumps({**base, **over})


# -- hostile values by role ------------------------------------------------------------------

READ_PATHS: dict[str, tuple[str, dict[str, object]]] = {
    # name: (the path given, the files it needs)
    "dotdot": ("{d}/sub/../../{sname}/victim.txt", {"sub/": ""}),
    "absolute-outside": ("{s}/victim.txt", {}),
    "link-top": ("{d}/in.yaml", {"in.yaml": Link("{s}/victim.txt")}),
    "link-below": ("{d}/dir/victim.txt", {"dir": Link("{s}")}),
    "link-dangling": ("{d}/in.yaml", {"in.yaml": Link("{d}/nowhere")}),
    "link-loop": ("{d}/in.yaml", {"in.yaml": Link("{d}/in.yaml")}),
    "fifo": ("{d}/in.yaml", {"in.yaml": FIFO}),
    "dev-zero": ("/dev/zero", {}),
    "dev-null": ("/dev/null", {}),
    "dev-urandom-link": ("{d}/in.yaml", {"in.yaml": Link("/dev/urandom")}),
    "a-directory": ("{d}/in.yaml", {"in.yaml/": ""}),
    "missing": ("{d}/missing.yaml", {}),
    "empty-string": ("", {}),
    "escape-in-name": ("{d}/a\x1b]0;t\x07.yaml", {"a\x1b]0;t\x07.yaml": "extends: {glm}\n"}),
    "newline-in-name": ("{d}/a\nb.yaml", {"a\nb.yaml": "extends: {glm}\n"}),
    "backslash-in-name": ("{d}/a\\b.yaml", {"a\\b.yaml": "extends: {glm}\n"}),
    "name-too-long": ("{d}/" + "n" * 300 + ".yaml", {}),
    "option-like": ("--", {}),
    "past-the-profile-limit": (
        "{d}/big.yaml",
        {"big.yaml": Sparse(PROFILE_MAX + 1, b"name: x\n#")},
    ),
    "past-the-json-limit": ("{d}/big.json", {"big.json": Sparse(JSON_MAX + 1, b"{")}),
}
WRITE_PATHS: dict[str, tuple[str, dict[str, object]]] = {
    "fresh": ("{d}/out", {}),
    "nested-missing-parent": ("{d}/out/a/b/c", {}),
    "link-top-to-sentinel": ("{d}/out", {"out": Link("{s}")}),
    "link-below-to-sentinel": (
        "{d}/out",
        {
            "out/leaderworkerset.yaml": Link("{s}/victim.txt"),
            "out/plan.json": Link("{s}/victim.txt"),
        },
    ),
    "operator-files": (
        "{d}/out",
        {"out/index.html": "<html>keep</html>\n", "out/notes.yaml": "k: v\n"},
    ),
    "a-plain-file": ("{d}/out", {"out": "an operator's file\n"}),
    "a-fifo": ("{d}/out", {"out": FIFO}),
    "dev-null": ("/dev/null", {}),
    "under-a-file": ("{d}/out/x", {"out": "a file\n"}),
    "escape-in-name": ("{d}/out/\x1b]0;t\x07", {}),
    "foreign-emit-manifest": (
        "{d}/out",
        {
            f"out/{MANIFEST}": json.dumps(
                {
                    "schema": "b12x-launch/emit-manifest/1",
                    "fingerprint": "x",
                    "files": {"../{sname}/victim.txt": "0" * 64, "index.html": "0" * 64},
                }
            ),
            "out/index.html": "<html>keep</html>\n",
        },
    ),
    "emit-manifest-past-its-limit": (
        "{d}/out",
        {f"out/{MANIFEST}": Sparse(MANIFEST_MAX + 1, b"{"), "out/index.html": "keep\n"},
    ),
}
PLOT_PATHS = {
    "fresh": ("{d}/plot.svg", {}),
    "link-top-to-sentinel": ("{d}/plot.svg", {"plot.svg": Link("{s}/victim.txt")}),
    "a-directory": ("{d}/plot.svg", {"plot.svg/": ""}),
    "missing-folder": ("{d}/no/plot.svg", {}),
    "wrong-suffix": ("{d}/plot.bmp", {}),
    "a-fifo": ("{d}/plot.svg", {"plot.svg": FIFO}),
}
NUMBERS = ["-1", "0", "1e400", "nan", "inf", "-inf", "99999999999999999999", "0x10", "", "1_0"]
CHOICES = ["", "K8S", "k8s,compose", "helm", "\x1b[2J"]
STRINGS = [
    "",
    " ",
    "-x",
    "$(touch PWNED)",
    "`touch PWNED`",
    "${HF_TOKEN}",
    "$(HF_TOKEN)",
    "a:b:c",
    "x" * 5000,
    "a\nb",
    *ESCAPES.values(),
]
SETS = [
    "model.path={d}/../{sname}",
    "model.path=/",
    "model.path=/var/run/m",
    "model.path=/cache/m",
    "model.path=/m/$(whoami)",
    "model.path=/m/a:b",
    "runtime.cache_root={s}",
    "runtime.cache_root=/dev/null",
    "runtime.cache_root={d}/cache/../../{sname}",
    "memory.kv_tokens=1099511627776",
    "memory.kv_tokens=-1",
    "serving.max_model_len=0",
    "hardware.count=1e9",
    "name=\x1b]0;pwned\x07",
    "description=\x9b2J\u202eevil",
    "served_name=x",
    "=",
    "~",
    "a.b.c.d.e.f.g.h=1",
    "env={A: {B: C}}",
    "vllm.extra_args=[--config, {s}/victim.txt]",
    "vllm.extra_args=[--load-format, dummy]",
    "vllm.command=[sh, -c, 'touch PWNED']",
]


# -- the families ----------------------------------------------------------------------------


def _secret_cases(cli: click.Group, rng: random.Random) -> Iterator[Generated]:
    """A secret of every shape, planted in every place, through every subcommand."""
    for command in [c for c in cli.commands if c != "schema"]:
        for name, value in SHAPES:
            q = _yaml(value)
            places: dict[str, tuple[list[str], dict[str, object], dict[str, str]]] = {
                "profile-env": ([], {"p.yaml": f"extends: {{glm}}\nenv: {{{name}: {q}}}\n"}, {}),
                "set-env": (["--set", f"env.{name}={value}"], {}, {}),
                "set-env-map": (["--set", f"env={{{name}: {q}}}"], {}, {}),
                "process-env": ([], {}, {name: value}),
            }
            if "://" in value or "@" in value:
                args = f"vllm.extra_args=[--otlp-traces-endpoint, {q}]"
                places["extra-arg-userinfo"] = (["--set", args], {}, {})
            if command == "sweep":
                places["vary"] = (["--vary", f"env.{name}={value},x"], {}, {})
            if command in ("launch", "sweep", "prewarm", "emit", "bake"):
                record = _record(fingerprint=FP, environment={name: value, "gpu_kind": "cpu"})
                places["store-record"] = (
                    [],
                    {f"cache/calibration/{FP}/measure-rank0.json": record},
                    {},
                )
            if command == "report":
                places = {
                    "record-env": (
                        [],
                        {
                            "run/plan.json": _plan_json(),
                            "run/measure-rank0.json": _record(environment={name: value}),
                        },
                        {},
                    ),
                    "process-env": ([], {"run/plan.json": _plan_json()}, {name: value}),
                    "log": (
                        ["--log", "{d}/vllm.log"],
                        {"run/plan.json": _plan_json(), "vllm.log": f"{name}={value}\n"},
                        {},
                    ),
                }
            for place, (extra, files, env) in places.items():
                profile = "{d}/p.yaml" if "p.yaml" in files else rng.choice(list(PROFILES.values()))
                argv = _base(command, rng, profile)
                if place == "store-record" and command != "bake":
                    extra = [*extra, "--set", "runtime.cache_root={d}/cache"]
                if command == "validate" and place in ("store-record",):
                    continue
                yield Generated(
                    f"secret/{place}/{command}/{name}",
                    f"secret/{place}",
                    tuple(argv + extra),
                    files,
                    env,
                )


def _path_cases(cli: click.Group, rng: random.Random) -> Iterator[Generated]:
    """Every path parameter of every subcommand, given each hostile path of its role."""
    for command, cmd in cli.commands.items():
        for opt, role in roles(cmd).items():
            if role in ("profile", "read"):
                pool = READ_PATHS
            elif role == "write":
                pool = PLOT_PATHS if opt == "--plot" else WRITE_PATHS
            elif role == "run":
                pool = {k: (p.replace("in.yaml", "run"), {kk.replace("in.yaml", "run"): v
                        for kk, v in f.items()}) for k, (p, f) in READ_PATHS.items()}  # fmt: skip
            else:
                continue
            for kind, (path, files) in pool.items():
                profile = rng.choice(list(PROFILES.values()))
                argv = _base(command, rng, profile)
                files = dict(files)
                if command == "bake":  # a CPU profile's parent: no NVML to ask for the cards
                    files = {k: v.replace("{glm}", "{tiny}") if isinstance(v, str) else v
                             for k, v in files.items()}  # fmt: skip
                if role in ("profile", "run"):
                    at = 1 if command != "launch" else 0
                    if command == "launch" and argv[0] != profile:
                        at = argv.index(profile)
                    argv[at] = path
                elif role == "write" and not opt.startswith("-"):
                    argv[2] = path  # emit OUT_DIR, bake OUT
                else:
                    argv += [opt, path]
                if command == "report" and role != "run":
                    files["run/plan.json"] = _plan_json()
                yield Generated(
                    f"path/{command}/{opt}/{kind}", f"path/{role}/{kind}", tuple(argv), files
                )


def _string_cases(cli: click.Group, rng: random.Random) -> Iterator[Generated]:
    """Every string, number and choice option, given each hostile value of its role."""
    for command, cmd in cli.commands.items():
        for opt, role in roles(cmd).items():
            pool = {"number": NUMBERS, "choice": CHOICES, "string": STRINGS, "set": SETS}.get(role)
            if role == "vary":
                pool = [
                    f"{s.split('=', 1)[0]}={s.split('=', 1)[1]},x" for s in SETS if "=" in s[1:]
                ]
            if pool is None:
                continue
            for i, value in enumerate(pool):
                argv = _base(command, rng, rng.choice(list(PROFILES.values())))
                files: dict[str, object] = {}
                if command == "report":
                    files["run/plan.json"] = _plan_json()
                yield Generated(
                    f"value/{command}/{opt}/{i}", f"value/{role}", (*argv, opt, value), files
                )


def _record_cases(rng: random.Random) -> Iterator[Generated]:
    """Records of foreign plans and ranks, with escapes, past their limits, through their
    readers: the store (every plan), a run (report)."""
    store = f"cache/calibration/{FP}/"
    escape_records = {
        f"escape-{k}": {
            "run/plan.json": _plan_json(),
            "run/measure-rank0.json": _record(
                when=v,
                late_compiles=[{"kind": "b12x", "kernel": f"k{v}", "cost_bytes": 1 << 20}],
            ),
        }
        for k, v in ESCAPES.items()
    }
    runs: dict[str, dict[str, object]] = {
        **escape_records,
        "foreign-fingerprint": {
            "run/plan.json": _plan_json(),
            "run/measure-rank0.json": _record(fingerprint=OTHER_FP),
        },
        "foreign-rank": {"run/plan.json": _plan_json(), "run/measure-rank0.json": _record(rank=3)},
        "record-past-its-limit": {
            "run/plan.json": _plan_json(),
            "run/measure-rank0.json": Sparse(JSON_MAX + 1, b"{"),
        },
        "record-link-out": {
            "run/plan.json": _plan_json(),
            "run/measure-rank0.json": Link("{s}/victim.txt"),
        },
        "plan-link-out": {"run/plan.json": Link("{s}/victim.txt")},
        "plan-escape-profile": {"run/plan.json": _plan_json(profile="p\x1b]0;x\x07")},
        "run-a-link-out": {"run": Link("{s}")},
    }
    for kind, files in runs.items():
        for extra in ([], ["--log", "{d}/vllm.log"], ["--plot", "{d}/plot.svg"]):
            log = (
                {"vllm.log": "GPU KV cache size: 1,000 tokens \x1b]0;t\x07\n"}
                if extra[:1] == ["--log"]
                else {}
            )
            yield Generated(
                f"record/report/{kind}/{len(extra) and extra[0]}",
                f"record/run/{kind}",
                ("report", "{d}/run", *extra),
                {**files, **log},
            )
    stores: dict[str, dict[str, object]] = {
        **{
            f"qualified-escape-{k}": {store + "qualified.json": _qualified(when=v)}
            for k, v in ESCAPES.items()
        },
        **{
            f"learned-escape-{k}": {
                store + "measure-rank0.json": _record(
                    fingerprint=FP,
                    environment={"gpu_kind": "rtx-pro-6000"},
                    learned=[{"kind": "b12x", "kernel": f"k{v}", "cost_bytes": 1 << 20}],
                )
            }
            for k, v in ESCAPES.items()
        },
        "qualified-foreign-plan": {store + "qualified.json": _qualified(fingerprint=OTHER_FP)},
        "qualified-past-its-limit": {store + "qualified.json": Sparse(RECORD_MAX + 1, b"{")},
        "qualified-link-out": {store + "qualified.json": Link("{s}/victim.txt")},
        "record-foreign-plan": {store + "measure-rank0.json": _record(fingerprint=OTHER_FP)},
        "record-past-its-limit": {store + "measure-rank0.json": Sparse(JSON_MAX + 1, b"{")},
        "store-link-out": {"cache/calibration": Link("{s}")},
        "store-plan-link-out": {f"cache/calibration/{FP}": Link("{s}")},
    }
    for kind, files in stores.items():
        for command in ("launch", "sweep", "prewarm", "emit", "bake", "qualify"):
            argv = _base(command, rng, "{glm}")
            if command != "bake":
                argv += ["--set", "runtime.cache_root={d}/cache"]
            yield Generated(f"record/{command}/{kind}", f"record/store/{kind}", tuple(argv), files)


def _archive_cases(rng: random.Random) -> Iterator[Generated]:
    """Damaged, hostile and bomb artifacts, restored by a launch (``--cache-from``) and
    shipped by ``emit --cache-from``."""
    cache = ("--set", "runtime.cache_root={d}/cache")
    for kind, data in _archives().items():
        name = "art.tar.gz" if "gz" in kind else "art.tar"
        yield Generated(
            f"archive/launch/{kind}",
            f"archive/{kind}",
            ("{tiny}", "--cache-from", f"{{d}}/{name}", *cache),
            {name: data},
        )
        yield Generated(
            f"archive/emit/{kind}",
            f"archive/{kind}",
            ("emit", rng.choice(["{glm}", "{two}"]), "{d}/out", "--cache-from", f"{{d}}/{name}"),
            {name: data},
        )


VICTIM = "a file the launcher does not own\n"
"""What the sentinel's ``victim.txt`` holds (``tests/unit/test_hostile_inputs.py``)."""


def _journal_cases() -> Iterator[Generated]:
    """A forged restore journal in the cache root (every launch rolls one back): listing
    files out of the root by ``..``, by an absolute path and through a link, with their
    hashes; and a staging directory that is a link out."""
    import hashlib

    from launcher.artifact.restore import JOURNAL, STAGING

    sha = hashlib.sha256(VICTIM.encode()).hexdigest()
    journals = {
        "dotdot": ("../../{sname}/victim.txt", {}),
        "absolute": ("{s}/victim.txt", {}),
        "through-a-link": ("triton/victim.txt", {"cache/triton": Link("{s}")}),
    }
    cache = ("--set", "runtime.cache_root={d}/cache")
    # A launch or qualify of the CPU profile would start vLLM where it is installed (the full
    # venv): those take GLM-5.2, refused on this machine's cards; --print-command runs the
    # launch's whole preparation, the journal's roll-back among it, and stops before the exec.
    modes = {
        "launch": ("{glm}", *cache),
        "print-command": ("{tiny}", "--print-command", "--run-dir", "{d}/run", *cache),
        "dry-run": ("{tiny}", "--dry-run", *cache),
        "qualify": ("qualify", "{glm}", *cache),
        "bake": ("bake", "{tiny}", "{d}/art", *cache),
    }
    for kind, (rel, files) in journals.items():
        journal = json.dumps({"artifact_id": "x", "files": [{"path": rel, "sha256": sha}]})
        for mode, argv in modes.items():
            yield Generated(
                f"journal/{kind}/{mode}",
                f"journal/{kind}",
                argv,
                {f"cache/{JOURNAL}": journal, **(files or {"cache/triton/ab/k.json": "x"})},
            )
    for mode, argv in modes.items():
        yield Generated(
            f"journal/staging-a-link/{mode}",
            "journal/staging-a-link",
            argv,
            {f"cache/{STAGING}x": Link("{s}"), "cache/triton/ab/k.json": "x"},
        )


def _replace_cases() -> Iterator[Generated]:
    """``bake --replace`` and ``emit --replace`` over what they did not make: a web app
    holding a ``manifest.json``, a foreign ``.tar``, a link to another tree."""
    cache = ("--set", "runtime.cache_root={d}/cache")
    warm = {"cache/triton/ab/k.json": "x"}
    outs = {
        "webapp": ("{d}/art", {"art/manifest.json": "{}\n", "art/index.html": "<html>\n"}),
        "foreign-tar": ("{d}/art.tar", {"art.tar": _tar([_member("notes.txt")])}),
        "link-to-sentinel-webapp": ("{d}/art", {"art": Link("{s}/webapp")}),
    }
    for kind, (out, files) in outs.items():
        yield Generated(
            f"replace/bake/{kind}",
            f"replace/bake/{kind}",
            ("bake", "{tiny}", out, "--replace", *cache),
            {**warm, **files},
        )
    for kind, files in {
        "operator-files": {"out/index.html": "keep\n", "out/service.yaml": "kind: Service\n"},
        "link-to-sentinel": {"out": Link("{s}/webapp")},
    }.items():
        yield Generated(
            f"replace/emit/{kind}",
            f"replace/emit/{kind}",
            ("emit", "{glm}", "{d}/out", "--replace"),
            files,
        )


def _flag_cases(cli: click.Group, rng: random.Random) -> Iterator[Generated]:
    """Every flag of every subcommand alone, and every pair of them, on a valid command line
    (the pairs a subcommand refuses must be refused by name, not crash)."""
    for command, cmd in cli.commands.items():
        flags = [p.opts[0] for p in cmd.params if isinstance(p, click.Option) and p.is_flag]
        combos = [[f] for f in flags] + [
            [a, b] for i, a in enumerate(flags) for b in flags[i + 1 :]
        ]
        for combo in combos:
            argv = _base(command, rng, rng.choice(list(PROFILES.values())))
            files = {"run/plan.json": _plan_json()} if command == "report" else {}
            yield Generated(
                f"flags/{command}/{'+'.join(combo)}", f"flags/{command}", (*argv, *combo), files
            )


def _option_secret_cases() -> Iterator[Generated]:
    """A secret of every shape in emit's free-text options (written into its files) and on
    vLLM's command line through an option that names no secret (``--served-model-name``)."""
    for name, value in SHAPES:
        shaped = value not in (S, f"ghp_{S}")  # a bare token has no shape to tell it by
        for opt in ("--image", "--profile-ref", "--cache-from") if shaped else ():
            arg = f"oci:{value}" if opt == "--cache-from" else value
            yield Generated(
                f"secret/emit-option/{opt}/{name}",
                "secret/emit-option",
                ("emit", "{glm}", "{d}/out", opt, arg),
            )
        for command in ("launch", "emit", "sweep", "validate"):
            args = f"vllm.extra_args=[--api-key, {_yaml(value)}]"
            argv = [*_base(command, random.Random(0), "{glm}")]
            yield Generated(
                f"secret/extra-arg-api-key/{command}/{name}",
                "secret/extra-arg-api-key",
                (*argv, "--set", args),
            )


def generate(cli: click.Group, seed: int) -> list[Generated]:
    """The generated cases for ``seed`` (the same seed, the same cases, in the same order)."""
    rng = random.Random(seed)
    cases = [
        *_secret_cases(cli, rng),
        *_path_cases(cli, rng),
        *_string_cases(cli, rng),
        *_record_cases(rng),
        *_archive_cases(rng),
        *_flag_cases(cli, rng),
        *_journal_cases(),
        *_replace_cases(),
        *_option_secret_cases(),
    ]
    # every case that plants no secret of its own carries one of a shape the seed picks, in
    # the process environment: no path, record or flag may bring it into an output
    cases = [
        c if c.env or c.family.startswith("secret/") else replace(c, env=dict([rng.choice(SHAPES)]))
        for c in cases
    ]
    rng.shuffle(cases)
    return cases
