"""A corpus of bad profiles, each run through the real CLI (``b12x-launch FILE --dry-run``).

Every ``tests/corpus/bad/*.yaml`` is one case; its leading comment lines say what to expect:

    # expect: <a substring of the output (the error line, or DOES NOT FIT)>
    # exit: 3                      (optional; default 1)
    # set: KEY=VALUE               (optional, repeatable: --set overrides)
    # xfail: <why>                 (optional: the launcher is wrong here; a strict xfail)

Files under ``tests/corpus/bad/_parts/`` are helpers (extends parents), not cases.

The error-line checks here are shared with ``test_fuzz.py``: each line of a failed run is
``error: FILE[:LINE] [KEY]: MESSAGE``; FILE is a file that was read (or ``--set``); a KEY is
named unless the file as a whole is at fault (malformed YAML, not found, not a mapping);
and when KEY exists in FILE, LINE is the line that sets it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from launcher.cli import cli
from tests.conftest import ROOT

CORPUS = ROOT / "tests" / "corpus" / "bad"
FILE_LEVEL = (
    "malformed YAML",
    "file not found",
    "cannot read",
    "not a b12x-launch profile",
    "a profile is a mapping",
    "--set takes KEY=VALUE",
)
"""Messages about a whole file (or a whole --set), which name no key."""


@dataclass(frozen=True)
class ErrorLine:
    text: str
    file: str
    line: int | None
    key: str
    message: str


@dataclass(frozen=True)
class Problem:
    """One way an error output breaks the contract; ``kind`` groups them."""

    kind: str
    text: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.text!r}"


_WHERE = re.compile(r"(?P<file>--set|[^\s:]+)(?::(?P<line>\d+))?(?P<tail>.*)\Z", re.S)


def parse_error_line(text: str) -> ErrorLine | None:
    """``error: FILE[:LINE] [KEY]: MESSAGE`` split up; None when ``text`` is not one."""
    if not text.startswith("error: "):
        return None
    match = _WHERE.match(text[len("error: ") :])
    if not match:
        return None
    tail = match["tail"]
    if tail.startswith(": "):
        key, message = "", tail[2:]
    elif tail.startswith(" ") and ": " in tail:
        key, _, message = tail[1:].partition(": ")
    else:
        return None
    line = int(match["line"]) if match["line"] else None
    return ErrorLine(text, match["file"], line, key, message)


def split_key(key: str) -> tuple[str, ...]:
    """``serving.cudagraph_capture_sizes[2]`` -> ('serving', 'cudagraph_capture_sizes', '2')."""
    if not key:
        return ()
    parts: list[str] = []
    for dotted_part in key.split("."):
        name, *indices = re.split(r"\[(\d+)\]", dotted_part)
        if name or not indices:
            parts.append(name)
        parts.extend(i for i in indices if i)
    return tuple(parts)


@dataclass(frozen=True)
class KeyLine:
    line: int
    via_digit_mapping_key: bool
    """Some part of the path is a mapping key made of digits (printed as ``[n]``)."""


def key_lines(text: str) -> dict[tuple[str, ...], list[KeyLine]]:
    """Every key path of a YAML document and the lines that set it (empty if malformed)."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except Exception:  # any unreadable document: no key lines to check against
        return {}
    out: dict[tuple[str, ...], list[KeyLine]] = {}
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, tuple[str, ...], bool]] = [(root, (), False)] if root else []
    while stack and len(seen) < 100_000:
        node, path, digits = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode):
                    sub = (*path, str(k.value))
                    d = digits or str(k.value).isdigit()
                    out.setdefault(sub, []).append(KeyLine(k.start_mark.line + 1, d))
                    stack.append((v, sub, d))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                sub = (*path, str(i))
                out.setdefault(sub, []).append(KeyLine(item.start_mark.line + 1, digits))
                stack.append((item, sub, digits))
    return out


def error_problems(stderr: str) -> list[Problem]:
    """What is wrong with a failed run's error output (empty: it keeps the contract)."""
    lines = stderr.rstrip("\n").split("\n")
    if not stderr.strip():
        return [Problem("no-error-output", stderr)]
    problems: list[Problem] = []
    previous: ErrorLine | None = None
    broken = False  # the last error line stopped inside its key (a key with a newline)
    texts: dict[str, dict] = {}
    for text in lines:
        err = parse_error_line(text)
        if err is None:
            cut = text.startswith("error: ") and ": " not in text[len("error: ") :]
            kind = "multiline:key" if cut or broken else _continuation_kind(text, previous)
            problems.append(Problem(kind, text))
            broken = broken or cut
            continue
        previous, broken = err, False
        file_level = err.message.startswith(FILE_LEVEL)
        if err.file != "--set" and not file_level and not os.path.isfile(err.file):
            problems.append(Problem("file-not-a-file", text))
        if not err.key and not file_level:
            problems.append(Problem("no-key", text))
        if not err.key or err.file == "--set" or not os.path.isfile(err.file):
            continue
        if err.file not in texts:
            texts[err.file] = key_lines(Path(err.file).read_text(errors="replace"))
        where = texts[err.file].get(split_key(err.key))
        if where and err.line not in {w.line for w in where}:
            digits = any(w.via_digit_mapping_key for w in where)
            kind = "no-line" if err.line is None else "wrong-line"
            problems.append(Problem(kind + (":digit-key" if digits else ""), text))
    return problems


def _continuation_kind(text: str, previous: ErrorLine | None) -> str:
    """A line that is not an error line: which error's text ran onto it."""
    if text.startswith("internal error"):
        return "internal-error"
    if previous is None:
        return "not-an-error-line"
    if previous.message.startswith("value is not YAML"):
        return "multiline:set-value-yaml"
    if previous.message.startswith("malformed YAML"):
        return "multiline:malformed-yaml"
    return "not-an-error-line"


# --- the corpus -------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    path: Path
    expect: list[str]
    exit_code: int
    sets: list[str]
    xfail: str


def read_case(path: Path) -> Case:
    expect, sets, exit_code, xfail = [], [], 1, ""
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        tag, _, value = line[1:].strip().partition(":")
        value = value.strip()
        if tag == "expect":
            expect.append(value)
        elif tag == "exit":
            exit_code = int(value)
        elif tag == "set":
            sets.append(value)
        elif tag == "xfail":
            xfail = value
    assert expect, f"{path.name}: no '# expect:' line"
    return Case(path, expect, exit_code, sets, xfail)


CASES = [read_case(p) for p in sorted(CORPUS.glob("*.yaml"))]


def run_case(case: Case):
    args = [str(case.path), "--dry-run", *(f"--set={s}" for s in case.sets)]
    return CliRunner().invoke(cli, args)


def _param(case: Case):
    marks = [pytest.mark.xfail(strict=True, reason=case.xfail)] if case.xfail else []
    return pytest.param(case, id=case.path.stem, marks=marks)


def test_the_corpus_is_big_enough():
    assert len(CASES) >= 20
    assert all(p.name.endswith(".yaml") for p in (CORPUS / "_parts").iterdir())


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_bad_profile(case: Case):
    result = run_case(case)
    output = result.output
    assert result.exit_code == case.exit_code, output
    assert result.exception is None or isinstance(result.exception, SystemExit), output
    assert "Traceback" not in output and "internal error" not in output, output
    for expect in case.expect:
        assert expect in output, f"{expect!r} not in:\n{output}"
    if case.exit_code == 3:
        assert "DOES NOT FIT" in output, output
        return
    assert result.stdout == "", "a failed run prints nothing on stdout"
    assert not error_problems(result.stderr), (error_problems(result.stderr), result.stderr)
    for line in [x for x in result.stderr.splitlines() if case.expect[0] in x]:
        err = parse_error_line(line)
        assert err is not None, line
        if err.file == "--set":
            continue
        # the error names a file of this case: the case itself or one of its parts
        assert Path(err.file).resolve().is_relative_to(CORPUS), line
        if err.key and split_key(err.key) in key_lines(Path(err.file).read_text()):
            assert err.line is not None, f"{err.key} is in {err.file} but no line: {line}"


def test_error_line_parser():
    err = parse_error_line("error: p.yaml:12 serving.max_num_seqs: must be at least 1")
    assert err == ErrorLine(err.text, "p.yaml", 12, "serving.max_num_seqs", "must be at least 1")
    err = parse_error_line("error: p.yaml:3: malformed YAML: expected ',' or ']'")
    assert err is not None and err.key == "" and err.message.startswith("malformed YAML")
    assert parse_error_line("error: --set env.A: bad").file == "--set"
    assert parse_error_line("internal error (a bug in b12x-launch): X") is None
    assert split_key("vllm.extra_args[2]") == ("vllm", "extra_args", "2")
    assert split_key("env[123]") == ("env", "123")
    assert split_key("speculative.") == ("speculative", "")


def test_key_lines_survive_recursive_and_malformed_yaml():
    assert key_lines("a: &x\n  - *x\n")[("a",)][0].line == 1
    assert key_lines("a: [unclosed\n") == {}
    assert key_lines("env:\n  '12': x\n")[("env", "12")] == [KeyLine(2, True)]
