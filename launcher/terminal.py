"""What reaches a terminal: text from records, files and flags, with every control sequence made
visible.

A record, a journal or a profile is written by whoever can write its volume; its text (a date,
a kernel's name, a path) must not drive the terminal that prints it: an OSC sequence retitles
the window or swallows the rest of the output, a CSI one moves the cursor over earlier lines,
a bidi override reorders what is read. ``printable`` writes each such character as its escape
(``\\x1b``); ``guarded`` puts every line the CLI prints through it, so no print site can forget.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""C0 (less tab and newline), DEL, C1 and the bidi marks, embeddings, overrides and isolates."""
_SGR = re.compile(r"(\x1b\[[0-9;]*m)")
"""A colour or style: what rich writes to a terminal, and nothing else."""


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: object, *, keep_styles: bool = False) -> str:
    """``text`` with every control character written as its escape (``\\x1b``, ``\\u202e``);
    newlines and tabs kept. ``keep_styles`` keeps colour and style sequences (rich's own)."""
    s = str(text)
    if not keep_styles:
        return _CONTROL.sub(_escape, s)
    return "".join(p if i % 2 else _CONTROL.sub(_escape, p) for i, p in enumerate(_SGR.split(s)))


class _Printable:
    """A text stream that writes through ``printable`` (styles kept only on a terminal)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        try:
            self._styles = bool(stream.isatty())
        except (AttributeError, ValueError, OSError):
            self._styles = False

    def write(self, text: str) -> int:
        if not isinstance(text, str):  # click probes with b"": a text stream refuses bytes
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        self._stream.write(printable(text, keep_styles=self._styles))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):
        if name == "buffer":  # no raw path around the filter
            raise AttributeError(name)
        return getattr(self._stream, name)


@contextmanager
def guarded() -> Iterator[None]:
    """Every write to ``sys.stdout`` and ``sys.stderr`` made printable, while it lasts."""
    out, err = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = _Printable(out), _Printable(err)  # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = out, err
