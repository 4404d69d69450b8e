"""What qualify is doing, on stderr: a live rich panel on a terminal, plain lines otherwise."""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from launcher.units import format_size


class Progress:
    """``phase()``, ``requests()``, ``low_water()`` and ``say()`` from any thread."""

    def __init__(self, stream: TextIO | None = None, live: bool | None = None):
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self._phase = ""
        self._done = self._failed = self._total = 0
        self._low: int | None = None
        self._sampling = "off"
        self._started = time.monotonic()
        self._lock = threading.Lock()
        self._live = None

    # -- updates ------------------------------------------------------------------------
    def phase(self, name: str) -> None:
        with self._lock:
            self._phase = name
            self._done = self._failed = self._total = 0
            self._started = time.monotonic()
        self._line(f"b12x-launch qualify: {name}")

    def requests(self, done: int, failed: int, total: int) -> None:
        with self._lock:
            self._done, self._failed, self._total = done, failed, total
        if not self.live:
            self._line(
                f"b12x-launch qualify: {done + failed}/{total} requests"
                + (f" ({failed} failed)" if failed else "")
                + self._low_text()
            )

    def low_water(self, free: int | None, sampling: str) -> None:
        with self._lock:
            self._low, self._sampling = free, sampling

    def say(self, message: str) -> None:
        self._line(f"b12x-launch qualify: {message}")

    # -- output -------------------------------------------------------------------------
    def _low_text(self) -> str:
        if self._low is None:
            return ""
        return f", low-water free {format_size(self._low)}"

    def _line(self, text: str) -> None:
        if self._live is not None:
            self._live.console.print(text, highlight=False, markup=False)
        else:
            print(text, file=self.stream, flush=True)

    def _render(self):
        from rich.table import Table

        table = Table.grid(padding=(0, 2))
        elapsed = time.monotonic() - self._started
        table.add_row("phase", f"{self._phase} ({elapsed:.0f}s)")
        if self._total:
            failed = f", {self._failed} failed" if self._failed else ""
            table.add_row("requests", f"{self._done}/{self._total} done{failed}")
        low = format_size(self._low) if self._low is not None else "-"
        table.add_row("low-water free", f"{low} ({self._sampling})")
        return table

    def __enter__(self) -> Progress:
        if self.live:
            from rich.console import Console
            from rich.live import Live

            console = Console(file=self.stream, highlight=False)
            # The panel redraws itself from the fields above (get_renderable).
            self._live = Live(console=console, refresh_per_second=4, get_renderable=self._render)
            self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
