"""What the docs quote the tool printing is what it prints today.

Every ```text block of README.md and docs/operations.md whose first line is
``$ b12x-launch ...`` is that command's output (120 columns, as in a file or a pipe). A block
may stop early (an excerpt), a line ``...`` alone skips lines (the next quoted line is found
by its first words), and a line ending in `` ...`` is cut there; every other line must be the
tool's line, in order. Regenerate after an intended change with:
    python -m tests.unit.test_docs_output
which rewrites each block from the tool, keeping its length and its cuts.
"""

from __future__ import annotations

import re
import shlex
import sys
from dataclasses import dataclass

import pytest
from click.testing import CliRunner

from launcher.cli import cli
from tests.conftest import ROOT

DOCS = ("README.md", "docs/operations.md")
CUT = " ..."
GAP = "..."
ANCHOR = 16
"""Characters of the line after a gap that find it again in the output."""
BLOCK = re.compile(r"^```text\n(\$ b12x-launch [^\n]*)\n(.*?)^```$", re.M | re.S)


@dataclass(frozen=True)
class Quote:
    doc: str
    command: str
    lines: tuple[str, ...]
    span: tuple[int, int]
    """Where the block's body is in the document (characters)."""


def quotes(doc: str) -> list[Quote]:
    text = (ROOT / doc).read_text()
    return [
        Quote(doc, m.group(1), tuple(m.group(2).splitlines()), m.span(2))
        for m in BLOCK.finditer(text)
    ]


def printed(command: str) -> list[str]:
    """The command's output, stdout and stderr as a terminal shows them, 120 columns."""
    args = shlex.split(command)[2:]  # "$ b12x-launch ..."
    out = CliRunner(env={"COLUMNS": None}).invoke(cli, args)
    return [line.rstrip() for line in out.output.splitlines()]


def matches(quoted: str, line: str) -> bool:
    if quoted.endswith(CUT):
        return line.startswith(quoted[: -len(CUT)].rstrip())
    return quoted.rstrip() == line


ALL = [q for doc in DOCS for q in quotes(doc)]


def test_the_docs_quote_the_tool():
    assert len(ALL) >= 4, [q.command for q in ALL]


def aligned(quote: Quote, lines: list[str]) -> list[tuple[str, str | None]]:
    """Each quoted line beside the output line it stands for (None: a gap, or past the end)."""
    out: list[tuple[str, str | None]] = []
    at, gap = 0, False
    for quoted in quote.lines:
        if quoted == GAP:
            out.append((quoted, None))
            gap = True
            continue
        if gap:
            key = quoted[:ANCHOR]
            at = next((i for i in range(at, len(lines)) if lines[i].startswith(key)), len(lines))
            gap = False
        out.append((quoted, lines[at] if at < len(lines) else None))
        at += 1
    return out


@pytest.mark.parametrize("quote", ALL, ids=[f"{q.doc}:{q.command[2:60]}" for q in ALL])
def test_a_quoted_output_is_what_the_command_prints_today(quote):
    for i, (quoted, line) in enumerate(aligned(quote, printed(quote.command))):
        if quoted == GAP:
            continue
        assert line is not None and matches(quoted, line), (
            f"{quote.doc}, block `{quote.command}`, line {i + 1}:\n  docs: {quoted}\n"
            f"  tool: {line}\nregenerate: python -m tests.unit.test_docs_output"
        )


def regenerate() -> None:
    for doc in DOCS:
        text = (ROOT / doc).read_text()
        for quote in reversed(quotes(doc)):  # from the end: earlier spans stay valid
            body = []
            for quoted, line in aligned(quote, printed(quote.command)):
                if line is None:
                    body.append(quoted)
                elif quoted.endswith(CUT):
                    body.append(line[: len(quoted) - len(CUT)].rstrip() + CUT)
                else:
                    body.append(line)
            start, end = quote.span
            text = text[:start] + "\n".join(body) + "\n" + text[end:]
        (ROOT / doc).write_text(text)
        print(f"rewrote the quoted output in {doc}", file=sys.stderr)


if __name__ == "__main__":
    regenerate()
