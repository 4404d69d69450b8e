"""Property-based fuzzing of the profile loader and the planner, through the real CLI.

Whatever the profile, ``b12x-launch PROFILE --json`` (or ``--dry-run``) ends in one of:

* exit 0 and a plan that fits (``"fits": true``);
* exit 3 and a plan that does not fit (``"fits": false`` with its reasons);
* exit 1 and only ``error: FILE[:LINE] [KEY]: MESSAGE`` lines (see ``test_corpus.py``);

never a traceback, an "internal error", another exit code, or a hang.

Inputs: random YAML documents (schema-shaped and free-form), random YAML-ish text with
tags, anchors and broken syntax, mutations of every shipped profile (a value of another
type, negative and huge numbers, a key deleted, a typo'd key, raw text spliced into a
line), and random ``--set`` overrides.

Knobs (environment):

* ``FUZZ_EXAMPLES``: examples over the whole file (default 300), shared between the tests;
* ``FUZZ_TIMEOUT``: seconds one run may take before it counts as a hang (default 2);
* ``FUZZ_MEMORY_MIB``: memory one run may add before it fails with MemoryError (1024);
* ``FUZZ_STRICT=1``: fail on the known bugs below too, instead of counting them;
* ``FUZZ_SURVEY=1``: never fail; count every failure and show the first of each kind;
* ``FUZZ_STATS=path``: also write the outcome counts there as JSON.

The outcome counts are printed at the end of the module (and show in
``--hypothesis-show-statistics``).

Known bugs: each ``KnownBug`` is a launcher bug found by this fuzzing (or while writing
it) with its minimal reproducer, which ``test_known_bug_reproducer`` runs as a strict
xfail. A fuzz example that fails the same way counts as that bug instead of failing the
test. Once a bug is fixed its reproducer passes, the strict xfail fails, and its entry is
to be deleted.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import string
import tempfile
import threading
import time
import traceback
import types
import typing
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from launcher import pipeline
from launcher.cli import cli
from launcher.errors import LauncherError, ProfileError
from launcher.plan.catalog import architectures, gpu_kinds
from launcher.profile.schema import Profile
from tests.conftest import PROFILES
from tests.unit.test_corpus import Problem, error_problems

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "300"))
TIMEOUT = float(os.environ.get("FUZZ_TIMEOUT", "2"))
STRICT = os.environ.get("FUZZ_STRICT") == "1"
SURVEY = os.environ.get("FUZZ_SURVEY") == "1"
MEMORY = int(float(os.environ.get("FUZZ_MEMORY_MIB", "1024")) * 2**20)

settings.register_profile(
    "fuzz",
    database=None,
    derandomize=True,
    deadline=timedelta(seconds=TIMEOUT + 3),
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
FUZZ = settings.get_profile("fuzz")


def share(fraction: float) -> settings:
    """The fuzz settings with ``fraction`` of FUZZ_EXAMPLES."""
    return settings(FUZZ, max_examples=max(1, round(EXAMPLES * fraction)))


# --- running one case -------------------------------------------------------------------


class Hang(BaseException):
    """A run took longer than FUZZ_TIMEOUT (a BaseException: ``except Exception`` misses it)."""


LAUNCHER = str(Path(pipeline.__file__).parent)


def _in_launcher(frame) -> bool:
    while frame is not None:
        if frame.f_code.co_filename.startswith(LAUNCHER):
            return True
        frame = frame.f_back
    return False


@contextlib.contextmanager
def time_limit(seconds: float):
    """Interrupt the launcher code in the block after ``seconds`` (SIGALRM, main thread).

    The alarm repeats every 0.2 s but raises only while launcher code is on the stack:
    a Hang swallowed by a finalizer is raised again, and click's own clean-up (which
    restores sys.stdout) is never interrupted.
    """
    usable = hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()
    if seconds <= 0 or not usable:
        yield
        return

    def on_alarm(signum, frame):
        if _in_launcher(frame):
            raise Hang(f"no result after {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    outer, _ = signal.setitimer(signal.ITIMER_REAL, seconds, 0.2)  # pytest-timeout's, say
    start = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:
            signal.setitimer(signal.ITIMER_REAL, max(0.001, outer - (time.monotonic() - start)))


@contextlib.contextmanager
def memory_limit(extra: int):
    """Cap the address space at its current size + ``extra`` bytes (Linux; else a no-op).

    A huge list built in C (``list(range(10**9))``) cannot be interrupted by the time
    limit; with the cap it ends in a quick MemoryError instead of eating the machine.
    """
    try:
        import resource

        pages = int(Path("/proc/self/statm").read_text().split()[0])
    except (ImportError, OSError, ValueError):
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = pages * os.sysconf("SC_PAGE_SIZE") + extra
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@contextlib.contextmanager
def guarded():
    """The time and memory limits one run gets."""
    with memory_limit(MEMORY), time_limit(TIMEOUT):
        yield


@dataclass(frozen=True)
class Failure:
    """A broken property: ``kind`` is ``hang``, ``exception:Type`` or an error-line problem."""

    kind: str
    frames: frozenset[str] = frozenset()
    """``module.function`` of every launcher frame on the stack, for exceptions and hangs."""
    text: str = ""

    def __str__(self) -> str:
        where = f" in {', '.join(sorted(self.frames))}" if self.frames else ""
        return f"{self.kind}{where}: {self.text[-3000:]}"


@dataclass
class Outcome:
    exit_code: int | None
    output: str
    failure: Failure | None
    seconds: float


def _frames(tb) -> frozenset[str]:
    return frozenset(
        f"{Path(f.filename).stem}.{f.name}"
        for f in traceback.extract_tb(tb)
        if f.filename.startswith(LAUNCHER)
    )


def _exception_failure(exc: BaseException) -> Failure:
    text = "".join(traceback.format_exception(exc))
    kind = "hang" if isinstance(exc, Hang) else f"exception:{type(exc).__name__}"
    return Failure(kind, _frames(exc.__traceback__), text)


def invoke(args: list[str]):
    """The CLI under the time limit: (result, None) or (None, the hang)."""
    try:
        with guarded():
            return CliRunner().invoke(cli, args), None
    except Hang as hang:
        return None, hang


def run_cli(path: Path, sets: list[str] = (), mode: str = "--json") -> Outcome:
    """Run ``b12x-launch PATH MODE --set ...`` and judge the result."""
    args = [str(path), mode, "--no-calibration", *(f"--set={s}" for s in sets)]
    start = time.perf_counter()
    result, hang = invoke(args)
    seconds = time.perf_counter() - start
    if hang is not None:
        return Outcome(None, "", _exception_failure(hang), seconds)
    failure = judge(result, mode)
    if failure is not None and failure.kind in ("internal-error", "exception"):
        # the CLI hides a bug behind one line; --debug lets it through with its traceback
        debug, hang = invoke(["--debug", *args])
        exc = hang or (debug.exc_info[1] if debug and debug.exc_info else None)
        if exc is not None and not isinstance(exc, SystemExit):
            failure = _exception_failure(exc)
    return Outcome(result.exit_code, result.output, failure, seconds)


def judge(result, mode: str) -> Failure | None:
    """None when the run kept the contract, else what it broke."""
    out, err = result.stdout, result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return Failure("exception", text=result.output)
    if "Traceback" in result.output:
        return Failure("traceback-printed", text=result.output)
    if "internal error" in err:
        return Failure("internal-error", text=err)
    if result.exit_code in (0, 3):
        fits = result.exit_code == 0
        if mode == "--json":
            try:
                data = json.loads(out)
            except ValueError:
                return Failure("plan-not-json", text=out)
            if data.get("fits") is not fits or (not fits and not data.get("reasons")):
                return Failure("plan-fits-mismatch", text=out)
        elif ("DOES NOT FIT" in out) == fits or "Memory plan" not in out:
            return Failure("plan-fits-mismatch", text=out)
        return None
    if result.exit_code != 1:
        return Failure(f"exit-{result.exit_code}", text=result.output)
    if out:
        return Failure("stdout-on-error", text=result.output)
    return _problems_failure(error_problems(err), err)


def _problems_failure(problems: list[Problem], stderr: str) -> Failure | None:
    """The first problem that is no known bug (else the first), as a Failure."""
    failures = [Failure(p.kind, text=f"{p.text}\n--- stderr:\n{stderr}") for p in problems]
    return next((f for f in failures if known_bug(f) is None), failures[0] if failures else None)


# --- known bugs -------------------------------------------------------------------------

GLM_TEXT = (PROFILES / "glm52.yaml").read_text()
KIMI_TEXT = (PROFILES / "kimi-k2.yaml").read_text()
TINY = """\
hardware: {gpu: cpu}
model: {path: /nonexistent/tiny, architecture: tiny-llama}
serving: {max_model_len: 256, cudagraph_mode: NONE}
"""


@dataclass(frozen=True)
class KnownBug:
    id: str
    summary: str
    kind: str
    where: str
    """For a hang or an exception, a launcher ``module.function`` on the failing stack;
    for an error-line problem, a substring of the line (empty: any)."""
    profile: str
    sets: tuple[str, ...] = ()

    def matches(self, failure: Failure) -> bool:
        if failure.kind != self.kind:
            return False
        if self.kind == "hang" or self.kind.startswith("exception:"):
            return self.where in failure.frames
        return self.where in failure.text.partition("\n--- stderr:")[0]


# Bugs the fuzzer found, all fixed: each stays as a regression case below. A new bug the
# launcher cannot fix at once goes into KNOWN_BUGS with a strict-xfail reproducer.
FIXED_BUGS = (
    KnownBug(
        "suggest-exponential",
        "plan() -> _suggest() -> plan() for every smaller max_num_seqs, recursively: 2^seqs "
        "plans when nothing fits (kimi-k2, 32 seqs, never returns)",
        "hang",
        "plan._suggest",
        KIMI_TEXT,
        ("memory.safety_margin=90GiB",),
    ),
    KnownBug(
        "suggest-recursion",
        "the same recursion overflows the stack for a large max_num_seqs",
        "exception:RecursionError",
        "plan._suggest",
        KIMI_TEXT,
        (
            "memory.safety_margin=90GiB",
            "serving.max_num_seqs=5000",
            "serving.max_num_batched_tokens=5000",
        ),
    ),
    KnownBug(
        "capture-sizes-memory",
        "auto_capture_sizes builds list(range(...)) up to max_num_seqs x (1 + MTP), in the "
        "rules too: a huge max_num_seqs exhausts memory (2**31: ~10 GB, minutes, in C)",
        "exception:MemoryError",
        "rules.auto_capture_sizes",
        GLM_TEXT,
        ("serving.max_num_seqs=1000000000000000000",),
    ),
    KnownBug(
        "newline-in-key",
        "a key with a newline is printed raw: the error line breaks in two",
        "multiline:key",
        "",
        TINY + 'env: {"A\\nB": x}\n',
    ),
    KnownBug(
        "dcp-hint-linear",
        "the decode_context rule lists the divisors of tensor with range(1, tensor + 1)",
        "hang",
        "rules._dcp_divides_tp",
        GLM_TEXT,
        ("parallel.tensor=1000000000001",),
    ),
    KnownBug(
        "size-overflow",
        "parse_size: int(float('9' * 400) * MiB) raises OverflowError (float infinity)",
        "exception:OverflowError",
        "units.parse_size",
        TINY + "memory: {safety_margin: " + "9" * 400 + "MiB}\n",
    ),
    KnownBug(
        "plan-float-overflow",
        "a size beyond 1e308 bytes: _g() divides it into a float (OverflowError)",
        "exception:OverflowError",
        "plan._g",
        TINY + "memory: {safety_margin: 1" + "0" * 330 + "}\n",
    ),
    KnownBug(
        "kv-tokens-overflow",
        "kv.blocks_for_tokens: math.ceil(tokens / block) overflows a float for a huge kv_tokens",
        "exception:OverflowError",
        "kv.blocks_for_tokens",
        TINY + "memory: {kv_tokens: 1" + "0" * 330 + "}\n",
    ),
    KnownBug(
        "yaml-int-digits",
        "an integer over 4300 digits: int() raises ValueError inside PyYAML, which read_yaml "
        "does not catch",
        "exception:ValueError",
        "yamlsource.read_yaml",
        TINY + "name: " + "9" * 5000 + "\n",
    ),
    KnownBug(
        "set-int-digits",
        "the same in a --set value (load._apply_overrides catches only YAMLError)",
        "exception:ValueError",
        "load._apply_overrides",
        TINY,
        ("name=" + "9" * 5000,),
    ),
    KnownBug(
        "yaml-control-character",
        "a control character: yaml.SafeLoader(text) raises ReaderError outside read_yaml's try",
        "exception:ReaderError",
        "yamlsource.read_yaml",
        TINY + "description: a\x01b\n",
    ),
    KnownBug(
        "yaml-recursive-alias",
        "a recursive alias (a: &x [*x]): yamlsource._walk recurses forever",
        "exception:RecursionError",
        "yamlsource._walk",
        TINY + "vllm: {extra_args: &x [*x]}\n",
    ),
    KnownBug(
        "yaml-alias-bomb",
        "nested aliases (billion laughs): _walk visits every path, 10^9 for 9 levels",
        "hang",
        "yamlsource._walk",
        TINY
        + "x0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
        + "".join(f"x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9)),
    ),
    KnownBug(
        "pipeline-over-layers",
        "pipeline stages > layers: a stage with no layer has page_bytes 0 (ZeroDivisionError)",
        "exception:ZeroDivisionError",
        "kv.blocks_for",
        TINY.replace("{gpu: cpu}", "{gpu: cpu, count: 4}") + "parallel: {pipeline: 4}\n",
    ),
    KnownBug(
        "set-yaml-error-multiline",
        "--set KEY=[ prints PyYAML's multi-line error: the lines after the first are not "
        "'error: ' lines",
        "multiline:set-value-yaml",
        "",
        TINY,
        ("serving.max_num_seqs=[1",),
    ),
    KnownBug(
        "empty-key-unnamed",
        "an empty key ('': 1) is printed as no key at all: 'p.yaml:4: unknown key'",
        "no-key",
        ": unknown key",
        TINY + "'': 1\n",
    ),
    KnownBug(
        "digit-key-located-at-parent",
        "a mapping key of digits ('123' under env) is split as a list index: printed env[123] "
        "and located at the env: line instead of its own",
        "wrong-line:digit-key",
        "",
        TINY + "env:\n  OK: '1'\n  '123': x\n",
    ),
)


KNOWN_BUGS: tuple[KnownBug, ...] = ()


def known_bug(failure: Failure) -> KnownBug | None:
    return next((b for b in KNOWN_BUGS if b.matches(failure)), None)


# --- bookkeeping ------------------------------------------------------------------------

STATS: Counter[str] = Counter()
SLOWEST: list[tuple[float, str]] = []
FIRST: dict[str, str] = {}
"""The first failure of each kind, shown in the summary."""


def record(test: str, outcome: Outcome) -> None:
    """Count the outcome; fail on an unknown failure (or any, with FUZZ_STRICT=1)."""
    STATS["cases"] += 1
    STATS[f"cases {test}"] += 1
    failure = outcome.failure
    if failure is None:
        label = f"exit {outcome.exit_code}"
        SLOWEST.append((outcome.seconds, test))
        SLOWEST.sort(reverse=True)
        del SLOWEST[3:]
    else:
        bug = known_bug(failure)
        label = f"known bug {bug.id}" if bug else f"FAILURE {failure.kind}"
    STATS[label] += 1
    event(label)
    if failure is None:
        return
    FIRST.setdefault(label, str(failure)[:1500])
    if (STRICT or known_bug(failure) is None) and not SURVEY:
        raise AssertionError(f"{failure}\n--- output:\n{outcome.output[-3000:]}")


@pytest.fixture(scope="module", autouse=True)
def _fuzz_summary(request):
    started = time.perf_counter()
    yield
    if not STATS:
        return
    seconds = time.perf_counter() - started
    lines = [f"fuzz: {STATS['cases']} cases in {seconds:.1f} s (FUZZ_EXAMPLES={EXAMPLES})"]
    lines += [f"  {k}: {v}" for k, v in sorted(STATS.items()) if k != "cases"]
    lines += [f"  slowest passing run: {s:.2f} s ({t})" for s, t in SLOWEST[:1]]
    if SURVEY:
        lines += [f"first {k}:\n{v}" for k, v in sorted(FIRST.items())]
    plugins = request.config.pluginmanager
    reporter = plugins.get_plugin("terminalreporter")
    capture = plugins.get_plugin("capturemanager")
    if reporter is not None:
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            reporter.write_line("")
            for line in lines:
                reporter.write_line(line)
    if os.environ.get("FUZZ_STATS"):
        summary = {**STATS, "seconds": round(seconds, 2), "examples": EXAMPLES}
        Path(os.environ["FUZZ_STATS"]).write_text(
            json.dumps(summary, indent=2, sort_keys=True) + "\n"
        )


@contextlib.contextmanager
def workdir(files: dict[str, str | bytes]):
    """A fresh directory holding ``files``, as the cwd (relative model paths stay inside)."""
    old = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="fuzz-") as tmp:
        root = Path(tmp)
        for name, text in files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(text, bytes):
                path.write_bytes(text)
            else:
                path.write_text(text, encoding="utf-8", errors="surrogatepass")
        os.chdir(root)
        try:
            yield root
        finally:
            os.chdir(old)


# --- strategies: values -----------------------------------------------------------------

SECTIONS: dict[str, type[BaseModel]] = {
    name: f.annotation
    for name, f in Profile.model_fields.items()
    if isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel)
}
ALL_KEYS = sorted(
    set(Profile.model_fields) | {k for model in SECTIONS.values() for k in model.model_fields}
)
DOTTED_KEYS = sorted(
    [f"{s}.{k}" for s, model in SECTIONS.items() for k in model.model_fields]
    + [k for k in Profile.model_fields if k not in SECTIONS]
)
WORDS = [
    "auto", "none", "mtp", "measure", "fp8", "fp8_e4m3", "fp8_ds_mla", "nvfp4_ds_mla",
    "bfloat16", "float16", "exl3", "B12X_MLA_SPARSE", "FLASHMLA_SPARSE", "TRITON_MLA",
    "FLASH_ATTN", "NONE", "PIECEWISE", "FULL", "FULL_AND_PIECEWISE", "b12x", "vllm",
    "triton", "glm-5.2", "a100", "", " ", "~", "null", "true", "yes", "0x10", "1e3",
    "/nonexistent/model", ".", "/", *gpu_kinds(), *architectures(),
]  # fmt: skip
HUGE = [2**31, 2**63, 10**12 + 1, 10**18 + 7, 10**30, -(10**20), 10**400]
UNITS = ["", "B", "KiB", "MiB", "GiB", "TiB", "KB", "MB", "GB", "XB", "gib", " GiB", "iB"]

small_ints = st.integers(-3, 70) | st.sampled_from([0, 1, 2, 3, 4, 8, 16, 64, 128, 256, 4096])
numbers = (
    small_ints
    | st.integers()
    | st.sampled_from(HUGE)
    | st.floats(allow_nan=True, allow_infinity=True)
)
sizes = st.builds(
    lambda n, u: f"{n}{u}",
    st.integers(-(2**40), 2**40)
    | st.floats(0, 1e6, allow_nan=False).map(lambda x: round(x, 2))
    | st.sampled_from([10**30, "9" * 400, ".5", "1.", "1e3"]),
    st.sampled_from(UNITS),
)
texts = st.text(max_size=16) | st.sampled_from(WORDS)
keys = st.sampled_from(ALL_KEYS) | st.text(max_size=10) | st.sampled_from(["1", "A.B", "~"])
scalars = st.none() | st.booleans() | numbers | sizes | texts
anything = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=8,
)


def _plausible(annotation, name: str) -> st.SearchStrategy:
    """Values a user might well write for a field of this type (derived from the schema)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        inner = args[0]
        if any("parse_size" in repr(m) for m in args[1:]):
            return sizes | st.sampled_from([0, 512 * 2**20, 2**40])
        return _plausible(inner, name)
    if origin is typing.Literal:
        return st.sampled_from(args)
    if origin in (typing.Union, types.UnionType):
        return st.one_of([_plausible(a, name) for a in args])
    if origin is list:
        return st.lists(_plausible(args[0], name), max_size=6)
    if origin is dict:
        return st.dictionaries(st.sampled_from(["A", "B_1", "1X", ""]) | keys, texts, max_size=3)
    if annotation is type(None):
        return st.none()
    if annotation is bool:
        return st.booleans()
    if annotation is int:
        return small_ints
    if annotation is float:
        return st.floats(0.5, 16) | st.sampled_from([0.0, -1.0, 3.42])
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return section(annotation)
    return texts


NAMED = {
    "gpu": st.sampled_from([*gpu_kinds(), "a100", "RTX-PRO-6000"]),
    "architecture": st.sampled_from([*architectures(), "glm-9", None]),
    "path": st.sampled_from(["/nonexistent/model", "", "."]),
    "attention_backend": st.sampled_from(["B12X_MLA_SPARSE", "FLASHMLA_SPARSE", "TRITON_MLA"]),
    "quantization": st.sampled_from(["exl3", "fp8", None]),
}


def _field(name: str, f, wild: bool = True) -> st.SearchStrategy:
    """Values for field ``f``: plausible ones, and with ``wild`` anything at all."""
    if name in NAMED:
        plausible = NAMED[name]
    elif any("parse_size" in repr(m) for m in f.metadata):  # a top-level Size
        plausible = _plausible(typing.Annotated[int, *f.metadata], name)
    else:
        plausible = _plausible(f.annotation, name)
    return plausible | anything if wild else plausible


def section(model: type[BaseModel]) -> st.SearchStrategy:
    """A mapping of some of ``model``'s fields, mostly plausible, sometimes anything."""
    fields = {k: _field(k, f) for k, f in model.model_fields.items()}
    return st.fixed_dictionaries(
        {}, optional={**fields, **{"typo_" + k: anything for k in list(fields)[:1]}}
    )


@st.composite
def profile_documents(draw) -> dict:
    """A schema-shaped document: sections of real keys with plausible or random values."""
    doc: dict = {}
    for name, f in Profile.model_fields.items():
        required = name in ("model", "serving")
        if draw(st.integers(0, 9)) < (8 if required else 4):
            doc[name] = draw(_field(name, f))
    if draw(st.booleans()) and isinstance(doc.get("model"), dict):
        doc["model"]["architecture"] = draw(st.sampled_from(architectures()))
    if draw(st.integers(0, 4)) == 0:
        doc.update(draw(st.dictionaries(keys, anything, max_size=2)))
    return doc


def dump(data) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10**6)


def flow(value) -> str:
    """A value as one line of YAML (for --set and for splicing into a line)."""
    text = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, width=10**6)
    return text.removesuffix("\n...\n").strip()


FRAGMENTS = [
    "!!python/object/apply:os.system ['echo pwned']",
    "!!python/name:os.system",
    "!!python/object:launcher.profile.schema.Profile {}",
    "!!binary aGVsbG8=",
    "!!set {a, b}",
    "!!omap [{a: 1}]",
    "!!timestamp 2001-12-14",
    "!!float 1e3",
    "!!str 5",
    "!custom x",
    "&anchor 5",
    "*anchor",
    "*undefined",
    "[unclosed",
    "{a: 1",
    '"unterminated',
    "'single",
    "- item",
    "? complex",
    "a: b: c",
    "|\n  block",
    ">-\n  folded",
    "%YAML 1.1",
    "---",
    "...",
    "\t",
    "# comment",
    "~",
    "9" * 80,
    "0o777",
    "0x_ff",
    "1_000",
    ".inf",
    "-.inf",
    ".nan",
    "1e400",
    "2001-12-14",
    "<<: {a: 1}",
]
fragment = st.sampled_from(FRAGMENTS) | scalars.map(flow) | st.text(max_size=12)


@st.composite
def yaml_texts(draw) -> str:
    """YAML-ish lines: keys at random indents, values from tags, anchors and broken flow."""
    lines = []
    for _ in range(draw(st.integers(0, 12))):
        indent = " " * draw(st.sampled_from([0, 0, 2, 2, 4, 1, 3]))
        kind = draw(st.integers(0, 5))
        if kind == 0:
            lines.append(indent + draw(fragment))
        elif kind == 1:
            lines.append(f"{indent}- {draw(fragment)}")
        else:
            key = draw(st.sampled_from(ALL_KEYS) | st.text(max_size=6))
            value = draw(fragment | st.just(""))
            lines.append(f"{indent}{key}: {value}")
    return "\n".join(lines) + draw(st.sampled_from(["\n", "", "\n\n"]))


# --- strategies: mutations of the shipped profiles --------------------------------------

SHIPPED = {p.name: p.read_text() for p in sorted(PROFILES.glob("*.yaml"))}
PARSED = {name: yaml.safe_load(text) for name, text in SHIPPED.items()}
PLAUSIBLE = {
    **{
        (s, k): _field(k, f, wild=False)
        for s, m in SECTIONS.items()
        for k, f in m.model_fields.items()
    },
    **{
        (k,): _field(k, f, wild=False) for k, f in Profile.model_fields.items() if k not in SECTIONS
    },
}
"""A plausible value for each leaf key, by path: mutations that often stay valid."""


def _paths(node, prefix=()) -> list[tuple]:
    out = []
    if isinstance(node, dict):
        for k, v in node.items():
            out.append((*prefix, k))
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out.append((*prefix, i))
            out.extend(_paths(v, (*prefix, i)))
    return out


def _typo(word: str, draw) -> str:
    word = str(word)
    if not word:
        return "x"
    i = draw(st.integers(0, len(word) - 1))
    op = draw(st.sampled_from(["drop", "double", "swap", "replace", "case"]))
    if op == "drop" and len(word) > 1:
        return word[:i] + word[i + 1 :]
    if op == "swap" and i + 1 < len(word):
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    if op == "replace":
        return word[:i] + draw(st.sampled_from(string.ascii_lowercase + "_-")) + word[i + 1 :]
    if op == "case":
        return word.upper()
    return word[:i] + word[i] + word[i:]


def _topology(data: dict, draw) -> dict:
    """A consistent reshaping: TP x PP = GPUs x nodes, DCP dividing TP (reaches the planner)."""
    tp = draw(st.sampled_from([1, 2, 4, 8, 16, 3]))
    pp = draw(st.sampled_from([1, 1, 2, 3, 4, 100]))
    nodes = draw(st.sampled_from([n for n in (1, 2, 4) if (tp * pp) % n == 0]))
    dcp = draw(st.sampled_from([d for d in (1, 2, 4, 8) if tp % d == 0]))
    hardware = data.setdefault("hardware", {})
    parallel = data.setdefault("parallel", {})
    if not isinstance(hardware, dict) or not isinstance(parallel, dict):
        return data
    hardware.update(count=tp * pp // nodes, nodes=nodes)
    parallel.update(tensor=tp, pipeline=pp, decode_context=dcp)
    if nodes > 1:
        data.setdefault("runtime", {}).update(master_addr="10.0.0.1")
    return data


def _mutate_data(data: dict, draw) -> dict:
    paths = _paths(data)
    if not paths or draw(st.integers(0, 7)) == 0:
        return _topology(data, draw)
    path = draw(st.sampled_from(paths))
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    ops = ["plausible"] * 4 + ["replace", "replace", "huge", "delete", "typo", "rename", "add"]
    op = draw(st.sampled_from(ops))
    if op == "plausible" and path in PLAUSIBLE:
        parent[last] = draw(PLAUSIBLE[path])
    elif op in ("replace", "plausible"):
        parent[last] = draw(anything)
    elif op == "huge":
        parent[last] = draw(st.sampled_from(HUGE) | numbers | sizes)
    elif op == "delete":
        del parent[last]
    elif isinstance(parent, dict) and op in ("typo", "rename"):
        parent[_typo(last, draw)] = parent[last] if op == "typo" else parent.pop(last)
    elif isinstance(parent, dict):
        parent[draw(keys)] = draw(anything)
    else:
        parent.append(draw(anything))
    return data


def _mutate_text(text: str, draw) -> str:
    lines = text.split("\n")
    i = draw(st.integers(0, max(0, len(lines) - 1)))
    op = draw(st.sampled_from(["value", "value", "duplicate", "delete", "insert", "indent"]))
    line = lines[i]
    if op == "value" and ":" in line:
        lines[i] = line.split(":", 1)[0] + ": " + draw(fragment)
    elif op == "duplicate":
        lines.insert(i, line)
    elif op == "delete":
        del lines[i]
    elif op == "indent":
        lines[i] = " " * draw(st.integers(1, 3)) + line
    else:
        lines.insert(i, draw(yaml_texts()).rstrip("\n"))
    return "\n".join(lines)


@st.composite
def shipped_mutations(draw) -> tuple[str, dict[str, str]]:
    """(the profile to run, every shipped file with one of them mutated 1-3 times)."""
    target = draw(st.sampled_from(sorted(SHIPPED)))
    victim = target
    parent = PARSED[target].get("extends")
    if parent and draw(st.booleans()):
        victim = parent
    files = dict(SHIPPED)
    if draw(st.integers(0, 3)) == 0:
        text = files[victim]
        for _ in range(draw(st.integers(1, 2))):
            text = _mutate_text(text, draw)
        files[victim] = text
    else:
        data = yaml.safe_load(files[victim])
        for _ in range(draw(st.integers(1, 3))):
            data = _mutate_data(data, draw)
        files[victim] = dump(data)
    return target, files


set_keys = st.sampled_from(DOTTED_KEYS) | st.builds(
    lambda a, b: f"{a}.{b}", st.sampled_from(list(SECTIONS)), keys
)
set_values = scalars.map(flow) | anything.map(flow) | fragment
plausible_sets = st.sampled_from(sorted(PLAUSIBLE)).flatmap(
    lambda path: PLAUSIBLE[path].map(lambda v: f"{'.'.join(path)}={flow(v)}")
)
overrides = st.lists(
    plausible_sets
    | plausible_sets
    | st.builds(lambda k, v: f"{k}={v}", set_keys, set_values)
    | set_keys.map(lambda k: "~" + k)
    | st.sampled_from(["=1", "~", "serving.max_num_seqs", "~a=1", "a..b=1", ".=1", "env.0=x"])
    | st.text(max_size=12),
    min_size=1,
    max_size=4,
)
modes = st.sampled_from(["--json", "--json", "--json", "--dry-run"])


# --- the properties ---------------------------------------------------------------------


@share(0.2)
@given(doc=profile_documents(), mode=modes)
def test_random_profile_documents(doc, mode):
    with workdir({"p.yaml": dump(doc)}) as root:
        record("documents", run_cli(root / "p.yaml", mode=mode))


@share(0.15)
@given(text=yaml_texts() | st.text(max_size=80), mode=modes)
def test_random_yaml_text(text, mode):
    with workdir({"p.yaml": text}) as root:
        record("yaml-text", run_cli(root / "p.yaml", mode=mode))


@share(0.4)
@given(case=shipped_mutations(), mode=modes)
def test_mutated_shipped_profiles(case, mode):
    target, files = case
    with workdir(files) as root:
        record("mutations", run_cli(root / target, mode=mode))


@share(0.15)
@given(target=st.sampled_from(sorted(SHIPPED)), sets=overrides, mode=modes)
def test_random_set_overrides(target, sets, mode):
    with workdir(SHIPPED) as root:
        record("overrides", run_cli(root / target, sets, mode=mode))


@share(0.1)
@given(
    case=shipped_mutations() | profile_documents().map(lambda d: ("p.yaml", {"p.yaml": dump(d)}))
)
def test_pipeline_api(case):
    """``pipeline.load`` + ``make_plan(calibrate=False)``: a plan, or a located ProfileError."""
    target, files = case
    with workdir(files) as root:
        record("pipeline", run_pipeline(root / target))


def run_pipeline(path: Path) -> Outcome:
    start = time.perf_counter()
    try:
        with guarded():
            try:
                planned = pipeline.make_plan(pipeline.load(str(path)), calibrate=False)
                pipeline.render(planned, as_json=False)
                data = json.loads(pipeline.render(planned, as_json=True))
            except LauncherError as exc:
                code = exc.exit_code
                text = "\n".join(
                    f"error: {i}" for i in (exc.issues if isinstance(exc, ProfileError) else [exc])
                )
                problems = error_problems(text) if isinstance(exc, ProfileError) else []
                failure = _problems_failure(problems, text)
                return Outcome(code, text, failure, time.perf_counter() - start)
    except BaseException as exc:  # a bug or a hang: judged, not raised
        if isinstance(exc, KeyboardInterrupt):
            raise
        return Outcome(None, "", _exception_failure(exc), time.perf_counter() - start)
    seconds = time.perf_counter() - start
    fits = planned.plan.fits
    failure = None
    if data["fits"] is not fits or (not fits and not data["reasons"]):
        failure = Failure("plan-fits-mismatch", text=json.dumps(data)[:3000])
    return Outcome(0 if fits else 3, "", failure, seconds)


# --- known bugs: reproducers ------------------------------------------------------------


class FailsDifferently(Exception):
    """A known bug's reproducer no longer fails the way its entry says."""


@pytest.mark.parametrize(
    "bug",
    [
        *(pytest.param(b, id=b.id) for b in FIXED_BUGS),
        *(
            pytest.param(
                b,
                id=b.id,
                marks=pytest.mark.xfail(strict=True, raises=AssertionError, reason=b.summary),
            )
            for b in KNOWN_BUGS
        ),
    ],
)
def test_known_bug_reproducer(bug: KnownBug):
    """Each fixed bug's reproducer now passes; each known one is an xfail until fixed.

    A reproducer that fails some other way raises FailsDifferently, which is no xfail.
    """
    with workdir({"p.yaml": bug.profile}) as root:
        outcome = run_cli(root / "p.yaml", list(bug.sets))
    if outcome.failure is not None and not bug.matches(outcome.failure):
        raise FailsDifferently(str(outcome.failure))
    assert outcome.failure is None, str(outcome.failure)


def test_the_judge_accepts_good_runs_and_rejects_bad_ones():
    with workdir(SHIPPED) as root:
        assert run_cli(root / "glm52.yaml").failure is None
        assert run_cli(root / "tiny-cpu.yaml", mode="--dry-run").failure is None
        big = run_cli(root / "glm52.yaml", ["serving.max_model_len=1048576"])
        assert big.exit_code == 3 and big.failure is None
        bad = run_cli(root / "glm52.yaml", ["parallel.decode_context=3"])
        assert bad.exit_code == 1 and bad.failure is None
    kinds = [p.kind for p in error_problems("error: --set a.b: bad\nstray\n")]
    assert kinds == ["not-an-error-line"]
    kinds = [p.kind for p in error_problems("error: --set env.A\nB: bad\n")]
    assert kinds == ["multiline:key", "multiline:key"]
    assert [p.kind for p in error_problems("error: nowhere.yaml:1 a: b\n")] == ["file-not-a-file"]
    assert error_problems("Traceback (most recent call last):\n")[0].kind == "not-an-error-line"
    assert error_problems("internal error (a bug in b12x-launch): X\n")[0].kind == "internal-error"
