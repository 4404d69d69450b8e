"""The hand-written part of the corpus of odd and hostile inputs for every ``b12x-launch``
subcommand and flag (the generated part: ``tests/unit/hostile_space.py``).

Each ``Case`` is one command line with the files it needs, run by
``tests/unit/test_hostile_inputs.py`` in a directory of its own (its HOME and working
directory), in a process of its own under a time and a memory limit, with no program on
``PATH`` (no ``nvidia-smi``, no ``vllm``, no shell: nothing is started) and with secrets
planted in the process environment. The test holds every case to the same contract: no
internal error, no hang, no planted secret in any output or any file written, no change
outside the trees the launcher owns, and every refusal naming the file or flag it refuses.
``expect`` pins the outcome where it is known (``refused``: exit 1 or 2; ``ok``: exit 0;
``any``: whichever, held to the contract).

A case's strings may hold ``{d}`` (its directory), ``{glm}``, ``{tiny}``, ``{two}``,
``{kimi}`` (the shipped profiles) and ``{secret}`` (a planted secret: it must never come
back).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from launcher.artifact.manifest import VERSION
from tests.unit.hostile_space import (
    COMMANDS,
    FIFO,
    SECRET,
    Link,
)


@dataclass(frozen=True)
class Case:
    name: str
    argv: tuple[str, ...]
    files: dict[str, object] = field(default_factory=dict)
    """Relative path -> text, bytes, ``FIFO`` or a ``Link``; a name ending in ``/`` is a
    directory."""
    expect: str = "any"
    """``ok`` (exit 0), ``refused`` (exit 1 or 2), ``no-fit`` (exit 3) or ``any``."""
    names: tuple[str, ...] = ()
    """Besides the paths and flags of ``argv`` and the case's files, what a refusal may name."""

    @property
    def command(self) -> str:
        """The subcommand it exercises (``launch`` when none is named)."""
        for word in self.argv:
            if word in COMMANDS:
                return word
        return "launch"


FINGERPRINT = "{fp}"
"""Stands for the plan fingerprint of profiles/glm52.yaml (the calibration store's folder)."""
S = "{secret}"
E = "extends: {glm}\n"
BILLION_LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},"
    f"*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)},*{chr(97 + i)}]\n"
    for i in range(8)
)

DOCUMENTS: list[tuple[str, str | bytes, str]] = [
    # (name, text of p.yaml, expected outcome of a dry run)
    ("empty", "", "refused"),
    ("comment-only", "# nothing here\n", "refused"),
    ("bare-scalar", "just text\n", "refused"),
    ("a-list", "- hardware\n- model\n", "refused"),
    ("flow-list", "[1, 2, 3]\n", "refused"),
    ("billion-laughs", "name: x\n" + BILLION_LAUGHS, "refused"),
    ("deep-nesting", E + "description: " + "[" * 3000 + "]" * 3000 + "\n", "refused"),
    ("python-tag", E + "name: !!python/object/apply:os.system ['touch PWNED']\n", "refused"),
    ("python-name-tag", E + "name: !!python/name:os.system\n", "refused"),
    ("duplicate-key", E + "name: a\nname: b\n", "refused"),
    ("nan", E + "memory: {safety_margin: .nan}\n", "refused"),
    ("inf", E + "serving: {max_model_len: .inf}\n", "refused"),
    ("5000-digits", E + "serving: {max_model_len: " + "9" * 5000 + "}\n", "refused"),
    ("huge-int", E + "serving: {max_model_len: 99999999999999999999}\n", "refused"),
    ("negative-count", E + "hardware: {count: -4}\n", "refused"),
    ("zero-tensor", E + "parallel: {tensor: 0}\n", "refused"),
    ("float-count", E + "hardware: {count: 1.5}\n", "refused"),
    ("string-count", E + "hardware: {count: many}\n", "refused"),
    ("yaml11-octal-port", E + "serving: {port: 010000}\n", "refused"),
    ("yaml11-base60", E + "serving: {max_num_seqs: 1:30}\n", "refused"),
    ("yaml11-octal-env", E + "env: {T: 0755}\n", "refused"),
    ("bad-size-unit", E + "memory: {safety_margin: 12 parsecs}\n", "refused"),
    ("absurd-size", E + "memory: {safety_margin: 1e30GiB}\n", "refused"),
    ("negative-size", E + "memory: {safety_margin: -5GiB}\n", "refused"),
    ("env-a-list", E + "env: [a, b]\n", "refused"),
    ("env-value-a-map", E + "env: {A: {b: c}}\n", "refused"),
    ("env-name-with-equals", E + "env: {'A=B': x}\n", "any"),
    ("env-name-with-newline", E + 'env: {"A\\nB": x}\n', "any"),
    ("env-int-key", E + "env: {1: x}\n", "refused"),
    ("env-secrets", E + f"env: {{HF_TOKEN: {S}1, WANDB_KEY: {S}2, DB_PASSWORD: {S}3}}\n", "ok"),
    ("extra-args-a-string", E + "vllm: {extra_args: --seed 1}\n", "refused"),
    ("extra-args-nested", E + "vllm: {extra_args: [[a]]}\n", "refused"),
    ("extra-args-secret", E + f"vllm: {{extra_args: ['--api-key', '{S}']}}\n", "refused"),
    ("extra-args-prefix", E + "vllm: {extra_args: ['--max-model', '1024']}\n", "refused"),
    (
        "extra-args-many",
        E + "vllm: {extra_args: [" + ", ".join(["'--seed', '1'"] * 3000) + "]}\n",
        "any",
    ),
    ("unknown-section", E + "servng: {max_model_len: 1}\n", "refused"),
    ("unicode", E + "name: caf\u00e9-\u2603\ndescription: \u202eevil\u202c\n", "ok"),
    ("escape-codes", E + 'description: "a\\x1b[31mred\\x1b]0;title\\x07"\n', "ok"),
    ("long-line", E + "description: " + "x" * 200_000 + "\n", "ok"),
    ("over-a-mebibyte", "name: x\n" + "#" * (1 << 20) + "\n", "refused"),
    ("byte-order-mark", "\ufeff" + E, "ok"),
    ("tab-indent", "serving:\n\tmax_model_len: 1\n", "refused"),
    ("two-documents", E + "---\nname: b\n", "refused"),
    ("not-utf8", b"name: \xff\xfe\n", "refused"),
    ("nul-bytes", "name: a\x00b\n", "refused"),
    ("extends-a-list", "extends: [a, b]\n", "refused"),
    ("extends-an-int", "extends: 5\n", "refused"),
    ("extends-itself", "extends: p.yaml\n", "refused"),
    ("extends-missing", "extends: nothing.yaml\n", "refused"),
    ("extends-passwd", "extends: /etc/passwd\n", "refused"),
    ("extends-dev-zero", "extends: /dev/zero\n", "refused"),
    ("extends-a-directory", "extends: {d}\n", "refused"),
    ("extends-climbing", "extends: ../../../../../../../../etc/passwd\n", "refused"),
    ("extends-empty", "extends: ''\n", "refused"),
    ("served-name-injection", E + 'model: {served_name: "$(touch PWNED); `touch PWNED`"}\n', "ok"),
    ("name-traversal", E + "name: ../../../../tmp/b12x-evil\n", "ok"),
    ("name-very-long", E + "name: " + "n" * 10_000 + "\n", "any"),
    ("model-path-dev-zero", E + "model: {path: /dev/zero}\n", "refused"),
    ("model-path-etc", E + "model: {path: /etc, architecture: null}\n", "refused"),
    ("unknown-gpu", E + "hardware: {gpu: h9000}\n", "refused"),
    ("cache-root-dev-null", E + "runtime: {cache_root: /dev/null}\n", "any"),
    ("provider-os-system", E + "prewarm: {providers: ['os:system']}\n", "any"),
    ("command-a-shell", E + "vllm: {command: [sh, -c, 'touch PWNED']}\n", "ok"),
    ("command-a-secret", E + f"vllm: {{command: [vllm, serve, --api-key, {S}]}}\n", "refused"),
    ("merge-keys", E + "base: &b {max_model_len: 4096}\nserving: {<<: *b}\n", "refused"),
    ("bool-as-count", E + "hardware: {count: yes}\n", "refused"),
    ("null-sections", E + "serving: null\nmemory: ~\n", "any"),
    ("quantization-mismatch", E + "model: {quantization: fp8}\n", "refused"),
]
"""Profile files, each extending the shipped GLM-5.2 profile where it needs a whole one."""

SETS: list[tuple[str, str]] = [
    # (--set value, expected outcome of a dry run of profiles/glm52.yaml)
    ("noequals", "refused"),
    ("=1", "refused"),
    ("~", "refused"),
    ("~a=b", "refused"),
    (".=1", "refused"),
    ("a..b=1", "refused"),
    ("serving.=1", "refused"),
    ("serving.max_model_len=", "refused"),
    ("serving.max_model_len=[", "refused"),
    ("serving.max_model_len={a: *b}", "refused"),
    (f"env.HF_TOKEN={S}", "ok"),
    (f"env={{HF_TOKEN: {S}}}", "ok"),
    (f'env={{HF_TOKEN: "{S}}}', "refused"),
    (f"HF_TOKEN:{S}", "refused"),
    (f"~env.HF_TOKEN={S}", "refused"),
    (f"env.HF_TOKEN=[{S}", "refused"),
    ("serving.port=010000", "refused"),
    ("serving.port=1:30", "refused"),
    ("serving.max_model_len=01000000", "refused"),
    ("name=!!python/name:os.system", "refused"),
    ("serving=5", "refused"),
    ("serving.max_model_len.x=1", "refused"),
    ("x" * 20_000 + "=1", "refused"),
    ("env.A=" + "a" * 100_000, "ok"),
    ("hardware.count=1e9", "refused"),
    ("parallel.tensor=-1", "refused"),
    ("serving.max_model_len=.inf", "refused"),
    ("memory.safety_margin=-1", "refused"),
    ("model.path=/dev/zero", "refused"),
    ("runtime.node_rank=5", "refused"),
    ("hardware.nodes=100000", "refused"),
    ("serving.cudagraph_capture_sizes=[0]", "refused"),
    ("serving.cudagraph_capture_sizes=[" + ",".join(["4"] * 5000) + "]", "any"),
    ("serving.max_model_len=4096\nname: x", "refused"),
    ("env.\x01=x", "any"),
    ("env.A=\x1b[2J", "refused"),
    ("~serving", "refused"),
    ("memory.kv_tokens=1e99", "refused"),
    ("model.path=willfalco/GLM-5.2-EXL3-TR3-3.42bpw", "ok"),
]

EXTRA_ARGS: list[list[str]] = [
    ["--max-model", "1024"],
    ["--kv-cache-memory", "1000"],
    ["--num-gpu-blocks-override", "10"],
    ["--speculative-config.num_speculative_tokens", "5"],
    ["--compilation-config.cudagraph_mode", "NONE"],
    ["-O0"],
    ["--config", "x.yaml"],
    ["-t", "8"],
    ["-n", "2"],
    ["--device-memory-utilization", "0.5"],
    ["--spec-tokens", "2"],
    ["-sc.num_speculative_tokens", "2"],
    ["--max_model_len=4096"],
    ["--enforce-eager"],
    ["-qfp8"],
    ["--api-ke", S],
    ["--api-key=" + S],
    ["--ssl-keyfile-password", S],
    ["--hf-tok", S],
    ["--kv-transfer-config.api_key", S],
    ["--kv-transfer-config", '{"kv_connector": "x", "auth": {"token": "' + S + '"}}'],
    ["--d", "1"],
    ["--help"],
    ["--"],
    ["--seed", "1", "stray"],
    ["--max-model-len"],
    ["--enable-expert=yes"],
    ["--tool-call-parser", "hermes", "--enable-auto-tool-choice"],
    ["--frobnicate", "1"],
    ["-"],
    ["--api=" + S],  # ambiguous, with a secret after the =
    ["--enable-expert-parallel=" + S],  # a switch given a value
]
"""``vllm.extra_args`` of profiles/glm52.yaml (each with and without ``--force``)."""

VARIES: list[tuple[str, str]] = [
    ("x", "refused"),
    ("=", "refused"),
    ("serving.max_num_seqs=", "refused"),
    ("serving.max_num_seqs=1,,2", "refused"),
    ("~serving.max_num_seqs=1,2", "refused"),
    (f"env.HF_TOKEN={S}1,{S}2", "refused"),
    (f"env={{HF_TOKEN: {S}1}},{{HF_TOKEN: {S}2}}", "refused"),
    (f"env={{WANDB_KEY: {S}}},{{A: b}}", "refused"),
    ("serving.port=010000,8000", "any"),
    ("serving.max_num_seqs=[1,2", "any"),
    ("serving.max_num_seqs=" + ",".join(str(i) for i in range(1, 102)), "any"),
    ("serving.max_num_seqs=1,2", "any"),
    ("serving.max_model_len=0,-1,1e9,abc,.nan", "any"),
    ("parallel.decode_context=1,2,4", "any"),
    ("name=" + "a" * 5000 + ",b", "any"),
    ("hardware.count=1:30,2", "any"),
]


def _argv(*words: str) -> tuple[str, ...]:
    return tuple(words)


def _plan_json() -> str:
    """A small valid rendered plan (``report`` reads ranks, components and kv)."""
    comp = {"weights": {"bytes": 1 << 30, "source": "estimate"}}
    rank = {"rank": 0, "total_bytes": 8 << 30, "components": comp}
    return json.dumps(
        {
            "fingerprint": "0123456789ab",
            "ranks": [rank],
            "kv": {"tokens": 1000, "max_concurrency": 1.5},
        }
    )


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


def build() -> list[Case]:
    cases: list[Case] = []
    add = cases.append

    # -- profiles: every hostile document through validate and the dry run, and one more ----
    more = [
        ("--json",),
        ("sweep", "--vary", "serving.max_num_seqs=1,2"),
        ("emit", "{d}/out"),
        ("prewarm", "--list"),
        ("--print-command", "--run-dir", "{d}/run"),
        ("qualify",),
        ("--plot", "{d}/plan.svg"),
    ]
    for i, (name, text, expect) in enumerate(DOCUMENTS):
        files = {"p.yaml": text}
        add(Case(f"profile/{name}/validate", _argv("validate", "{d}/p.yaml"), files, expect))
        add(Case(f"profile/{name}/dry-run", _argv("{d}/p.yaml", "--dry-run"), files, expect))
        extra = more[i % len(more)]
        if extra[0] in ("sweep", "emit", "prewarm", "qualify"):
            argv = (extra[0], "{d}/p.yaml", *extra[1:])
        else:
            argv = ("{d}/p.yaml", *extra)
        outcome = "refused" if expect == "refused" or extra[0] == "qualify" else "any"
        add(Case(f"profile/{name}/{extra[0].lstrip('-')}", argv, files, outcome))

    # -- --set on the dry run and validate -------------------------------------------------
    for i, (value, expect) in enumerate(SETS):
        add(Case(f"set/{i}/dry-run", _argv("{glm}", "--dry-run", "--set", value), {}, expect))
        if i % 2 == 0:
            add(Case(f"set/{i}/validate", _argv("validate", "{glm}", "--set", value), {}, expect))
    add(
        Case(
            "set/emit-secret-mapping-profile-ref",
            _argv(
                "emit",
                "{glm}",
                "{d}/out",
                "--set",
                f"env={{HF_TOKEN: {S}}}",
                "--profile-ref",
                "glm52",
            ),
            {},
            "ok",
        )
    )
    add(
        Case(
            "set/emit-secret-mapping-shipped",
            _argv("emit", "{glm}", "{d}/out", "--set", f"env={{WANDB_KEY: {S}}}"),
            {},
            "ok",
        )
    )
    add(
        Case(
            "set/print-command-secret",
            _argv(
                "{tiny}",
                "--print-command",
                "--run-dir",
                "{d}/run",
                "--set",
                f"env={{HF_TOKEN: {S}}}",
            ),
            {},
            "ok",
        )
    )
    add(Case("set/json-secret", _argv("{glm}", "--json", "--set", f"env.MY_API_KEY={S}"), {}, "ok"))
    add(
        Case(
            "set/sweep-secret-in-set",
            _argv(
                "sweep", "{glm}", "--vary", "serving.max_num_seqs=1,2", "--set", f"env.HF_TOKEN={S}"
            ),
            {},
            "any",
        )
    )

    # -- vllm.extra_args, as vLLM's parser reads them --------------------------------------
    for i, args in enumerate(EXTRA_ARGS):
        value = "vllm.extra_args=" + json.dumps(args)
        secret = any(S in a for a in args)
        plain = args in (
            ["--tool-call-parser", "hermes", "--enable-auto-tool-choice"],
            ["--frobnicate", "1"],
        )
        add(
            Case(
                f"extra-args/{i}/validate",
                _argv("validate", "{glm}", "--set", value),
                {},
                "ok" if plain else "refused",
            )
        )
        forced = (
            "refused"
            if secret
            or args[0] in ("--d", "--help", "--", "--max-model-len", "--enable-expert=yes", "-")
            or args == ["--seed", "1", "stray"]
            else "any"
        )
        add(
            Case(
                f"extra-args/{i}/force",
                _argv("{glm}", "--dry-run", "--force", "--set", value),
                {},
                "ok" if plain else forced,
            )
        )
    add(
        Case(
            "extra-args/emit",
            _argv("emit", "{glm}", "{d}/out", "--set", 'vllm.extra_args=["--max-model", "1024"]'),
            {},
            "refused",
        )
    )
    add(
        Case(
            "extra-args/sweep",
            _argv(
                "sweep",
                "{glm}",
                "--vary",
                "serving.max_num_seqs=1,2",
                "--set",
                'vllm.extra_args=["-O0"]',
            ),
            {},
            "any",
        )
    )

    # -- sweep --vary ------------------------------------------------------------------------
    for i, (spec, expect) in enumerate(VARIES):
        add(Case(f"sweep/{i}", _argv("sweep", "{glm}", "--vary", spec), {}, expect))
    add(
        Case(
            "sweep/too-many",
            _argv(
                "sweep",
                "{glm}",
                "--vary",
                "serving.max_num_seqs=" + ",".join(map(str, range(1, 201))),
                "--vary",
                "serving.max_model_len=" + ",".join(str(4096 + i) for i in range(60)),
            ),
            {},
            "refused",
        )
    )
    add(
        Case(
            "sweep/twice",
            _argv(
                "sweep",
                "{glm}",
                "--vary",
                "serving.max_num_seqs=1,2",
                "--vary",
                "serving.max_num_seqs=4",
            ),
            {},
            "refused",
        )
    )
    add(
        Case(
            "sweep/json",
            _argv(
                "sweep", "{glm}", "--vary", "serving.max_num_seqs=1,2", "--json", "--no-calibration"
            ),
            {},
            "any",
        )
    )
    add(
        Case(
            "sweep/plot-bad-suffix",
            _argv("sweep", "{glm}", "--vary", "serving.max_num_seqs=1,2", "--plot", "{d}/x.txt"),
            {},
            "refused",
        )
    )
    add(
        Case(
            "sweep/plot-missing-dir",
            _argv("sweep", "{glm}", "--vary", "serving.max_num_seqs=1,2", "--plot", "{d}/no/x.svg"),
            {},
            "refused",
        )
    )
    add(Case("sweep/no-vary", _argv("sweep", "{glm}"), {}, "refused"))
    add(
        Case(
            "sweep/missing-profile", _argv("sweep", "{d}/none.yaml", "--vary", "a=1"), {}, "refused"
        )
    )

    # -- report RUN_DIR -----------------------------------------------------------------------
    plan = _plan_json()
    reports: list[tuple[str, dict[str, object], tuple[str, ...], str]] = [
        ("missing-dir", {}, ("{d}/none",), "refused"),
        ("a-file", {"run": "x"}, ("{d}/run",), "refused"),
        ("empty-dir", {"run/": ""}, ("{d}/run",), "refused"),
        ("plan-empty", {"run/plan.json": ""}, ("{d}/run",), "refused"),
        ("plan-a-list", {"run/plan.json": "[]"}, ("{d}/run",), "refused"),
        ("plan-null", {"run/plan.json": "null"}, ("{d}/run",), "refused"),
        ("plan-ranks-a-string", {"run/plan.json": '{"ranks": "x"}'}, ("{d}/run",), "refused"),
        ("plan-deep", {"run/plan.json": "[" * 100_000 + "]" * 100_000}, ("{d}/run",), "refused"),
        (
            "plan-infinity",
            {"run/plan.json": plan.replace("1000", "1e400")},
            ("{d}/run",),
            "refused",
        ),
        ("plan-nan", {"run/plan.json": plan.replace("1000", "NaN")}, ("{d}/run",), "refused"),
        (
            "plan-tokens-a-string",
            {"run/plan.json": plan.replace("1000", '"many"')},
            ("{d}/run",),
            "refused",
        ),
        ("plan-fifo", {"run/plan.json": FIFO}, ("{d}/run",), "refused"),
        ("plan-dev-zero", {"run/plan.json": Link("/dev/zero")}, ("{d}/run",), "refused"),
        ("plan-a-dir", {"run/plan.json/": ""}, ("{d}/run",), "refused"),
        ("plan-not-utf8", {"run/plan.json": b"\xff\xfe{}"}, ("{d}/run",), "refused"),
        ("plan-ok", {"run/plan.json": plan}, ("{d}/run",), "ok"),
        (
            "record-garbage",
            {"run/plan.json": plan, "run/measure-rank0.json": "{oops"},
            ("{d}/run",),
            "ok",
        ),
        (
            "record-types",
            {
                "run/plan.json": plan,
                "run/measure-rank0.json": _record(
                    kv={"blocks": 1, "tokens": "x", "planned_tokens": 1},
                    late_compiles=[{"kind": "b12x", "kernel": "k", "cost_bytes": "lots"}],
                ),
            },
            ("{d}/run",),
            "ok",
        ),
        (
            "record-fifo",
            {"run/plan.json": plan, "run/measure-rank0.json": FIFO},
            ("{d}/run",),
            "ok",
        ),
        (
            "record-secret-environment",
            {"run/plan.json": plan, "run/measure-rank0.json": _record(environment={"HF_TOKEN": S})},
            ("{d}/run",),
            "ok",
        ),
        (
            "record-huge-figure",
            {
                "run/plan.json": plan,
                "run/measure-rank0.json": _record(measured={"weights": 10**30}),
            },
            ("{d}/run",),
            "ok",
        ),
        ("log-dev-zero", {"run/plan.json": plan}, ("{d}/run", "--log", "/dev/zero"), "refused"),
        (
            "log-fifo",
            {"run/plan.json": plan, "log": FIFO},
            ("{d}/run", "--log", "{d}/log"),
            "refused",
        ),
        ("log-a-dir", {"run/plan.json": plan}, ("{d}/run", "--log", "{d}"), "refused"),
        ("log-missing", {"run/plan.json": plan}, ("{d}/run", "--log", "{d}/none.log"), "refused"),
        (
            "log-binary",
            {
                "run/plan.json": plan,
                "run/vllm.log": b"\xff\x00" * 1000 + b"GPU KV cache size: 12 tokens\n",
            },
            ("{d}/run",),
            "ok",
        ),
        (
            "log-secret",
            {"run/plan.json": plan, "run/vllm.log": f"api_key={S}\n"},
            ("{d}/run",),
            "ok",
        ),
        ("plot-bad-suffix", {"run/plan.json": plan}, ("{d}/run", "--plot", "{d}/x.bmp"), "refused"),
        (
            "plot-missing-dir",
            {"run/plan.json": plan},
            ("{d}/run", "--plot", "{d}/no/x.svg"),
            "refused",
        ),
    ]
    for name, files, args, expect in reports:
        add(Case(f"report/{name}", ("report", *args), files, expect))
    # -- status RUN_DIR (issue 67): phase files torn, foreign, huge, a FIFO, a link --------
    ready = json.dumps(
        {"schema": "b12x-launch/phases/1", "who": "rank0", "started": 1.0, "ready_at": 2.0,
         "phases": [{"name": "ready", "started": 2.0, "ended": 2.0}]}
    )  # fmt: skip
    statuses: list[tuple[str, dict[str, object], tuple[str, ...], str]] = [
        ("missing", {}, ("{d}/nope", "--once"), "refused"),
        ("a-file", {"f": "x"}, ("{d}/f", "--json"), "refused"),
        ("empty-dir", {"run/": ""}, ("{d}/run", "--once"), "refused"),
        ("torn", {"run/phases-rank0.json": '{"schema": "b12x-launch/phases/1", "who'},
         ("{d}/run", "--json"), "refused"),
        ("foreign", {"run/phases-rank0.json": '{"schema": "other"}'}, ("{d}/run",), "refused"),
        ("huge", {"run/phases-rank0.json": " " * (2 << 20)}, ("{d}/run", "--once"), "refused"),
        ("fifo", {"run/phases-rank0.json": FIFO}, ("{d}/run", "--json"), "refused"),
        ("link", {"run/phases-rank0.json": Link("/etc/passwd")}, ("{d}/run",), "refused"),
        ("secret-in-file", {"run/phases-rank0.json": f'{{"x": "{SECRET}"'}, ("{d}/run",),
         "refused"),
        ("ready-watch", {"run/phases-rank0.json": ready},
         ("{d}/run", "--watch", "--interval", "0.1"), "ok"),
        ("bad-interval", {"run/phases-rank0.json": ready}, ("{d}/run", "--interval", "-1"),
         "refused"),
    ]  # fmt: skip
    for name, files, args, expect in statuses:
        add(Case(f"status/{name}", ("status", *args), files, expect))

    # -- emit --------------------------------------------------------------------------------
    operator = {
        "out/service.yaml": "# mine\nkind: Service\n",
        "out/profile.notes.yaml": "notes: mine\n",
    }
    forged = json.dumps(
        {
            "schema": "b12x-launch/emit-manifest/1",
            "fingerprint": "x",
            "files": {"../victim.yaml": "0" * 64, "/etc/passwd": "0" * 64},
        }
    )
    emits: list[tuple[str, tuple[str, ...], dict[str, object], str]] = [
        ("ok", ("{glm}", "{d}/out"), {}, "ok"),
        ("two-node", ("{two}", "{d}/out"), {}, "ok"),
        ("tiny", ("{tiny}", "{d}/out"), {}, "ok"),
        ("out-is-a-file", ("{glm}", "{d}/out"), {"out": "x"}, "refused"),
        ("out-under-dev-null", ("{glm}", "/dev/null/out"), {}, "refused"),
        ("operator-files", ("{glm}", "{d}/out"), operator, "refused"),
        ("operator-files-replace", ("{glm}", "{d}/out", "--replace"), operator, "refused"),
        (
            "forged-manifest",
            ("{glm}", "{d}/out", "--replace"),
            {"out/b12x-launch-emit.manifest": forged, "victim.yaml": "keep\n"},
            "refused",
        ),
        (
            "manifest-a-fifo",
            ("{glm}", "{d}/out"),
            {"out/b12x-launch-emit.manifest": FIFO},
            "refused",
        ),
        ("target-bogus", ("{glm}", "{d}/out", "--target", "helm"), {}, "refused"),
        ("target-twice", ("{glm}", "{d}/out", "--target", "k8s", "--target", "k8s"), {}, "ok"),
        ("target-compose", ("{glm}", "{d}/out", "--target", "compose"), {}, "ok"),
        ("image-newline", ("{glm}", "{d}/out", "--image", "img\nkind: Secret"), {}, "refused"),
        ("image-substitution", ("{glm}", "{d}/out", "--image", "$(touch PWNED)"), {}, "refused"),
        ("image-empty", ("{glm}", "{d}/out", "--image", ""), {}, "refused"),
        ("image-long", ("{glm}", "{d}/out", "--image", "i" * 5000), {}, "refused"),
        (
            "profile-ref-traversal",
            ("{glm}", "{d}/out", "--profile-ref", "../../etc/shadow"),
            {},
            "any",
        ),
        (
            "profile-ref-substitution",
            ("{glm}", "{d}/out", "--profile-ref", "$(touch PWNED)"),
            {},
            "any",
        ),
        ("profile-ref-newline", ("{glm}", "{d}/out", "--profile-ref", "a\nb: c"), {}, "refused"),
        ("replace-empty", ("{glm}", "{d}/out", "--replace"), {}, "ok"),
        (
            "secret-profile",
            ("{d}/p.yaml", "{d}/out"),
            {"p.yaml": E + f"env: {{HF_TOKEN: {S}, WANDB_KEY: {S}2}}\n"},
            "ok",
        ),
        (
            "master-addr-substitution",
            ("{two}", "{d}/out", "--set", "runtime.master_addr=$(touch PWNED)"),
            {},
            "refused",
        ),
        ("ray-multinode", ("{two}", "{d}/out", "--set", "runtime.multinode=ray"), {}, "refused"),
        (
            "does-not-fit",
            ("{glm}", "{d}/out", "--set", "serving.max_model_len=1048576"),
            {},
            "no-fit",
        ),
        ("missing-out-arg", ("{glm}",), {}, "refused"),
    ]
    for name, args, files, expect in emits:
        add(Case(f"emit/{name}", ("emit", *args), files, expect))

    # -- the cache artifact: bake, --cache-from ------------------------------------------------
    def artifact(files: list[dict[str, object]], **keys: object) -> str:
        return json.dumps(
            {
                "format": "b12x-launch/cache-artifact",
                "version": VERSION,
                "keys": {"fingerprint": "0" * 12, "gpu_kind": "cpu", "build_id": "x", **keys},
                "files": files,
            }
        )

    traversal = artifact([{"path": "../../etc/cron.d/x", "size": 1, "sha256": "0" * 64}])
    absolute = artifact([{"path": "/etc/passwd", "size": 1, "sha256": "0" * 64}])
    cache = "--set", "runtime.cache_root={d}/cache"
    artifacts: list[tuple[str, tuple[str, ...], dict[str, object], str]] = [
        ("bake/empty-caches", ("bake", "{tiny}", "{d}/art", *cache), {}, "refused"),
        ("bake/out-inside-cache", ("bake", "{tiny}", "{d}/cache/art", *cache), {}, "refused"),
        ("bake/out-a-fifo", ("bake", "{tiny}", "{d}/art", *cache), {"art": FIFO}, "refused"),
        ("bake/out-is-a-file", ("bake", "{tiny}", "{d}/art", *cache), {"art": "x"}, "refused"),
        (
            "bake/replace-operator-dir",
            ("bake", "{tiny}", "{d}/art", "--replace", *cache),
            {"art/mine.txt": "keep\n"},
            "refused",
        ),
        (
            "bake/secret-set",
            ("bake", "{tiny}", "{d}/art", *cache, "--set", f"env={{HF_TOKEN: {S}}}"),
            {},
            "refused",
        ),
        ("bake/missing-out", ("bake", "{tiny}"), {}, "refused"),
        (
            "bake/fifo-in-a-cache",
            ("bake", "{tiny}", "{d}/art", *cache),
            {"cache/triton/ab/kernel.cubin": FIFO},
            "any",
        ),
        (
            "launch/cache-from-missing",
            ("{tiny}", "--cache-from", "{d}/nope", *cache),
            {},
            "refused",
        ),
        (
            "launch/cache-from-traversal",
            ("{tiny}", "--cache-from", "{d}/art", *cache),
            {"art/manifest.json": traversal},
            "refused",
        ),
        (
            "launch/cache-from-absolute",
            ("{tiny}", "--cache-from", "{d}/art", *cache),
            {"art/manifest.json": absolute},
            "refused",
        ),
        (
            "launch/cache-from-fifo-manifest",
            ("{tiny}", "--cache-from", "{d}/art", *cache),
            {"art/manifest.json": FIFO},
            "refused",
        ),
        (
            "launch/cache-from-not-json",
            ("{tiny}", "--cache-from", "{d}/art", *cache),
            {"art/manifest.json": f"password: {S}\n"},
            "refused",
        ),
        (
            "launch/cache-from-tar-garbage",
            ("{tiny}", "--cache-from", "{d}/art.tar", *cache),
            {"art.tar": b"\x00" * 1024},
            "refused",
        ),
        (
            "launch/cache-from-dry-run",
            ("{tiny}", "--cache-from", "{d}/art", "--dry-run"),
            {},
            "refused",
        ),
        (
            "emit/cache-from-oci",
            ("emit", "{glm}", "{d}/out", "--cache-from", "oci:reg/art:1"),
            {},
            "ok",
        ),
        (
            "emit/cache-from-substitution",
            ("emit", "{glm}", "{d}/out", "--cache-from", "oci:$(touch PWNED)"),
            {},
            "refused",
        ),
        (
            "emit/cache-from-pvc-compose",
            ("emit", "{glm}", "{d}/out", "--target", "compose", "--cache-from", "pvc:claim"),
            {},
            "refused",
        ),
        (
            "emit/cache-from-scheme",
            ("emit", "{glm}", "{d}/out", "--cache-from", "ftp://x/y"),
            {},
            "refused",
        ),
        (
            "emit/cache-from-relative",
            ("emit", "{glm}", "{d}/out", "--cache-from", "../art"),
            {},
            "refused",
        ),
    ]
    for name, args, files, expect in artifacts:
        add(Case(f"artifact/{name}", args, files, expect))

    # -- the calibration store (runtime.cache_root={d}/cache) ----------------------------------
    fp = FINGERPRINT
    store = f"cache/calibration/{fp}/"

    def qualified(blocks: object, **extra: object) -> str:
        return json.dumps(
            {"schema": "b12x-launch/qualified/1", "fingerprint": fp, "kv": {"blocks": blocks}}
            | extra
        )

    stores: list[tuple[str, dict[str, object], str]] = [
        ("qualified-absurd", {store + "qualified.json": qualified(999_999_999)}, "ok"),
        ("qualified-2-to-70", {store + "qualified.json": qualified(2**70)}, "ok"),
        ("qualified-float", {store + "qualified.json": qualified(1.5)}, "ok"),
        (
            "qualified-string-environment",
            {store + "qualified.json": qualified(2800, environment="x")},
            "ok",
        ),
        (
            "qualified-secret-environment",
            {store + "qualified.json": qualified(2800, environment={"HF_TOKEN": S})},
            "ok",
        ),
        (
            "qualified-other-plan",
            {store + "qualified.json": qualified(2800, fingerprint="0123456789ab")},
            "ok",
        ),
        ("qualified-link-passwd", {store + "qualified.json": Link("/etc/passwd")}, "ok"),
        ("qualified-fifo", {store + "qualified.json": FIFO}, "ok"),
        ("qualified-a-dir", {store + "qualified.json/": ""}, "ok"),
        ("qualified-deep", {store + "qualified.json": "[" * 50_000 + "]" * 50_000}, "ok"),
        ("rank-garbage", {store + "rank0.json": "{oops"}, "ok"),
        ("rank-other-plan", {store + "rank0.json": _record()}, "ok"),
        (
            "rank-huge",
            {store + "rank0.json": _record(fingerprint=fp, measured={"weights": 10**15})},
            "ok",
        ),
        (
            "rank-negative",
            {store + "rank0.json": _record(fingerprint=fp, measured={"weights": -5})},
            "ok",
        ),
        ("rank-99", {store + "rank99.json": _record(fingerprint=fp, rank=99)}, "ok"),
        (
            "rank-census-junk",
            {
                store + "rank0.json": _record(
                    fingerprint=fp,
                    learned=[{"kind": "b12x", "kernel": "k", "cost_bytes": "x"}, 5, None],
                )
            },
            "ok",
        ),
        (
            "rank-secret-environment",
            {store + "rank0.json": _record(fingerprint=fp, environment={"HF_TOKEN": S})},
            "ok",
        ),
        ("rank-fifo", {store + "rank1.json": FIFO}, "ok"),
        ("store-a-file", {"cache/calibration/" + fp: "x"}, "ok"),
    ]
    for name, files, expect in stores:
        add(
            Case(
                f"store/{name}",
                ("{glm}", "--json", "--set", "runtime.cache_root={d}/cache"),
                files,
                expect,
            )
        )
    add(
        Case(
            "store/prewarm-list",
            ("prewarm", "{glm}", "--list", "--set", "runtime.cache_root={d}/cache"),
            {
                store + "rank0.json": _record(
                    fingerprint=fp, learned=[{"kind": "triton", "kernel": "x" * 100_000}]
                )
            },
            "ok",
        )
    )
    hub = "cache/hub-headers/willfalco--GLM-5.2-EXL3-TR3-3.42bpw.json"
    for name, text in [
        ("garbage", "{oops"),
        (
            "types",
            json.dumps(
                {
                    "version": 1,
                    "repo_id": "willfalco/GLM-5.2-EXL3-TR3-3.42bpw",
                    "files": 1,
                    "config": [],
                    "tensors": [["w", "BF16", [-1], 5]],
                }
            ),
        ),
        ("fifo", FIFO),
        ("deep", "[" * 50_000),
    ]:
        add(
            Case(
                f"store/hub-cache-{name}",
                (
                    "{glm}",
                    "--json",
                    "--set",
                    "runtime.cache_root={d}/cache",
                    "--set",
                    "model.path=willfalco/GLM-5.2-EXL3-TR3-3.42bpw",
                ),
                {hub: text},
                "ok",
            )
        )

    # -- a checkpoint's config.json and safetensors headers ---------------------------------------
    llama = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "num_attention_heads": 4,
        "vocab_size": 1000,
        "intermediate_size": 128,
        "max_position_embeddings": 512,
    }
    configs: list[tuple[str, object, str]] = [
        ("layers-1e9", {**llama, "num_hidden_layers": 1e9}, "refused"),
        ("hidden-0", {**llama, "hidden_size": 0}, "refused"),
        (
            "infinity",
            json.dumps({**llama, "hidden_size": 1}).replace(
                '"hidden_size": 1', '"hidden_size": Infinity'
            ),
            "refused",
        ),
        ("negative", {**llama, "intermediate_size": -4096}, "refused"),
        ("a-list", [1, 2], "refused"),
        ("strings", {**llama, "num_attention_heads": "4"}, "refused"),
        ("not-json", "{oops", "refused"),
        ("deep", "[" * 50_000, "refused"),
        ("fifo", FIFO, "refused"),
        ("dev-zero", Link("/dev/zero"), "refused"),
        (
            "indexer-period-0",
            {**llama, "index_n_heads": 4, "index_layer_pattern": {"dense_first": 0, "period": 0}},
            "refused",
        ),
        (
            "exl3-bitmap-traversal",
            {
                **llama,
                "n_routed_experts": 4,
                "num_experts_per_tok": 2,
                "moe_intermediate_size": 32,
                "hybrid_tr3_tail": {
                    "bits": "mixed",
                    "bits_per_expert": "../../../../../../etc/passwd:k",
                },
            },
            "refused",
        ),
        (
            "exl3-bitmap-dev-zero",
            {
                **llama,
                "n_routed_experts": 4,
                "num_experts_per_tok": 2,
                "moe_intermediate_size": 32,
                "hybrid_tr3_tail": {"bits": "mixed", "bits_per_expert": "zero:k"},
            },
            "refused",
        ),
        (
            "exl3-layers-1e9",
            {
                **llama,
                "n_routed_experts": 4,
                "num_experts_per_tok": 2,
                "moe_intermediate_size": 32,
                "hybrid_tr3_tail": {"bits": 4, "moe_layers": "0-1000000000"},
            },
            "any",
        ),
        ("ok", llama, "ok"),
    ]
    for name, cfg, expect in configs:
        content = cfg if isinstance(cfg, (str, bytes, Link)) or cfg is FIFO else json.dumps(cfg)
        files = {"m/config.json": content, "m/zero": Link("/dev/zero")}
        argv = (
            "{tiny}",
            "--dry-run",
            "--set",
            "model.path={d}/m",
            "--set",
            'vllm.extra_args=["--load-format", "dummy"]',
        )
        add(Case(f"checkpoint/{name}", argv, files, expect))
    header = json.dumps({"w": {"dtype": "BF16", "shape": [-1, 4], "data_offsets": [0, 8]}}).encode()
    shards = [
        ("header-negative", len(header).to_bytes(8, "little") + header),
        ("header-huge-length", (2**63).to_bytes(8, "little") + b"{}"),
        ("header-truncated", b"\x01\x02"),
        ("header-not-json", (5).to_bytes(8, "little") + b"{oops"),
        ("shard-fifo", FIFO),
    ]
    for name, blob in shards:
        files = {"m/config.json": json.dumps(llama), "m/model.safetensors": blob}
        add(
            Case(
                f"checkpoint/{name}",
                ("{tiny}", "--dry-run", "--set", "model.path={d}/m"),
                files,
                "refused",
            )
        )

    # -- the launch's own flags (no GPU here, and nothing on PATH: nothing is started) ----------
    launches: list[tuple[str, tuple[str, ...], dict[str, object], str]] = [
        ("real-launch-no-gpu", ("{glm}",), {}, "refused"),
        ("force-no-gpu", ("{glm}", "--force"), {}, "refused"),
        ("strict-jit-no-gpu", ("{glm}", "--strict-jit"), {}, "refused"),
        ("node-rank-negative", ("{two}", "--dry-run", "--node-rank", "-1"), {}, "refused"),
        ("node-rank-word", ("{two}", "--dry-run", "--node-rank", "abc"), {}, "refused"),
        ("node-rank-99", ("{two}", "--dry-run", "--node-rank", "99"), {}, "refused"),
        ("join-timeout-0", ("{two}", "--dry-run", "--join-timeout", "0"), {}, "refused"),
        ("join-timeout-nan", ("{two}", "--dry-run", "--join-timeout", "nan"), {}, "refused"),
        ("join-timeout-inf", ("{two}", "--dry-run", "--join-timeout", "inf"), {}, "any"),
        ("join-timeout-word", ("{two}", "--dry-run", "--join-timeout", "soon"), {}, "refused"),
        (
            "run-dir-a-file",
            ("{tiny}", "--print-command", "--run-dir", "{d}/run"),
            {"run": "x"},
            "refused",
        ),
        (
            "run-dir-dev-null",
            ("{tiny}", "--print-command", "--run-dir", "/dev/null/run"),
            {},
            "refused",
        ),
        (
            "run-dir-foreign-plan",
            ("{tiny}", "--print-command", "--run-dir", "{d}/run"),
            {"run/plan.json": "my notes\n"},
            "refused",
        ),
        (
            "run-dir-foreign-record",
            ("{tiny}", "--print-command", "--run-dir", "{d}/run"),
            {"run/measure-rank0.json": "{}"},
            "refused",
        ),
        (
            "run-dir-command-fifo",
            ("{tiny}", "--print-command", "--run-dir", "{d}/run"),
            {"run/command.txt": FIFO},
            "refused",
        ),
        ("run-dir-ok", ("{tiny}", "--print-command", "--run-dir", "{d}/run"), {}, "ok"),
        (
            "run-dir-secret-env",
            ("{d}/p.yaml", "--print-command", "--run-dir", "{d}/run"),
            {"p.yaml": "extends: {tiny}\n" + f"env: {{HF_TOKEN: {S}}}\n"},
            "ok",
        ),
        ("print-command-and-json", ("{glm}", "--print-command", "--json"), {}, "refused"),
        ("plot-bad-suffix", ("{glm}", "--plot", "{d}/plan.bmp"), {}, "refused"),
        ("plot-missing-dir", ("{glm}", "--plot", "{d}/no/plan.svg"), {}, "refused"),
        ("no-calibration", ("{glm}", "--dry-run", "--no-calibration"), {}, "ok"),
        (
            "b12x-sizing",
            ("{glm}", "--dry-run", "--b12x-sizing", "--set", "prewarm.providers=[]"),
            {},
            "any",
        ),
        (
            "does-not-fit",
            ("{glm}", "--dry-run", "--set", "serving.max_model_len=1048576"),
            {},
            "no-fit",
        ),
        (
            "debug-anywhere",
            ("{glm}", "--dry-run", "--debug", "--set", "serving.port=010000"),
            {},
            "refused",
        ),
        ("profile-missing", ("{d}/none.yaml", "--dry-run"), {}, "refused"),
        ("profile-a-dir", ("{d}", "--dry-run"), {}, "refused"),
        ("profile-dash", ("-", "--dry-run"), {}, "refused"),
        ("profile-named-like-a-command", ("prewram", "--dry-run"), {}, "refused"),
    ]
    for name, args, files, expect in launches:
        add(Case(f"launch/{name}", args, files, expect))

    # -- the other subcommands ------------------------------------------------------------------
    others: list[tuple[str, tuple[str, ...], dict[str, object], str]] = [
        (
            "validate/several",
            ("validate", "{glm}", "{d}/none.yaml", "{d}/p.yaml"),
            {"p.yaml": "- x\n"},
            "refused",
        ),
        ("validate/none", ("validate",), {}, "refused"),
        ("validate/dev-zero", ("validate", "/dev/zero"), {}, "refused"),
        ("validate/fifo", ("validate", "{d}/p.yaml"), {"p.yaml": FIFO}, "refused"),
        (
            "validate/set-secret",
            ("validate", "{glm}", "--set", f'env={{API_TOKEN: "{S}'),
            {},
            "refused",
        ),
        ("validate/all-shipped", ("validate", "{glm}", "{two}", "{tiny}", "{kimi}"), {}, "ok"),
        ("schema/ok", ("schema",), {}, "ok"),
        ("schema/extra-argument", ("schema", "x"), {}, "refused"),  # names "(x)"
        ("schema/help", ("schema", "--help"), {}, "ok"),
        ("schema/run-file", ("schema", "--run-file"), {}, "ok"),
        ("schema/record", ("schema", "--record"), {}, "ok"),
        ("schema/qualified", ("schema", "--qualified"), {}, "ok"),
        ("schema/run-file-with-value", ("schema", "--run-file", "x"), {}, "refused"),
        ("prewarm/list", ("prewarm", "{glm}", "--list"), {}, "ok"),
        ("prewarm/list-tiny", ("prewarm", "{tiny}", "--list"), {}, "ok"),
        ("prewarm/device-word", ("prewarm", "{glm}", "--device", "abc"), {}, "refused"),
        (
            "prewarm/device-negative-list",
            ("prewarm", "{glm}", "--list", "--device", "-1"),
            {},
            "any",
        ),
        (
            "prewarm/bad-set",
            ("prewarm", "{glm}", "--list", "--set", "serving.port=1:30"),
            {},
            "refused",
        ),
        (
            "prewarm/provider-not-a-class",
            ("prewarm", "{glm}", "--list", "--set", "prewarm.providers=[os:system]"),
            {},
            "refused",
        ),
        (
            "prewarm/provider-missing-module",
            ("prewarm", "{glm}", "--list", "--set", "prewarm.providers=[no_such.mod:P]"),
            {},
            "refused",
        ),
        (
            "launch/print-command-injections",
            (
                "{tiny}",
                "--print-command",
                "--run-dir",
                "{d}/run",
                "--set",
                "model.served_name=$(touch PWNED)`touch PWNED`",
                "--set",
                "env.X='; touch PWNED; '",
                "--set",
                'vllm.extra_args=["--chat-template", "$(touch PWNED)"]',
            ),
            {},
            "ok",
        ),
        ("qualify/no-gpu", ("qualify", "{glm}"), {}, "refused"),
        ("qualify/verify-force", ("qualify", "{glm}", "--verify", "--force"), {}, "refused"),
        (
            "qualify/run-dir-a-file",
            ("qualify", "{glm}", "--run-dir", "{d}/run"),
            {"run": "x"},
            "refused",
        ),
        ("qualify/bad-set", ("qualify", "{glm}", "--set", "hardware.count=1e9"), {}, "refused"),
        (
            "qualify/extra-args-force",
            ("qualify", "{glm}", "--force", "--set", 'vllm.extra_args=["-O0"]'),
            {},
            "refused",
        ),
        ("top/typo", ("prewram", "{glm}"), {}, "refused"),
        ("top/unknown-option", ("--frobnicate",), {}, "refused"),
        ("top/version", ("--version",), {}, "ok"),
        ("top/help", ("-h",), {}, "ok"),
        ("top/nothing", (), {}, "any"),
        ("top/double-dash", ("--", "{glm}", "--dry-run"), {}, "any"),
        (
            "top/debug-first",
            ("--debug", "validate", "{d}/p.yaml"),
            {"p.yaml": "extends: /etc/passwd\n"},
            "refused",
        ),
        ("top/command-help", ("emit", "--help"), {}, "ok"),
    ]
    for name, args, files, expect in others:
        add(Case(name, args, files, expect))
    return cases


CASES = build()
