"""The planned worker's reads of vLLM's live objects, each through a declared internal
(``launcher.vllm.internals``), never ``getattr`` with a default.

The check before the weights (``worker.checked``) decided each entry against the installed
source; a live object may still lack what its source declares (a subclass, a stand-in). A
``refuse`` entry missing then stops the boot, named; any other is said once as the downgrade
its declaration names and kept for the rank record, beside the check's own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from launcher.contract.record import InternalsCheck, MissingInternal
from launcher.vllm.internals import InternalMissing, Missing, resolve

NOT_CHECKED = "not checked before the weights"
"""The release an ``InternalsCheck`` names when only the worker's live reads found a gap."""


class Readings:
    """One worker's declared reads and the downgrades they cost."""

    def __init__(self, warn: Callable[[str], None]) -> None:
        self._warn = warn
        self.missing: dict[str, MissingInternal] = {}

    def read(self, name: str, on: Any) -> Any:
        """``on``'s member of the declared entry ``name``, or ``Missing`` (said and kept);
        ``InternalMissing`` for a ``refuse`` entry."""
        found = resolve(name, on=on)
        if not isinstance(found, Missing):
            return found
        entry = found.entry
        if entry.without.kind == "refuse":
            raise InternalMissing(f"refused: {found}")
        if name not in self.missing:
            self._warn(f"{entry.needed_by}: not done as planned: {found}")
            self.missing[name] = MissingInternal(
                name=name,
                where=entry.where,
                needed_by=entry.needed_by,
                without=entry.without.kind,
                says=entry.without.says,
                why=found.why,
            )
        return found

    def into(self, check: InternalsCheck | None) -> InternalsCheck | None:
        """``check`` with the live reads' downgrades added (each entry once)."""
        if not self.missing:
            return check
        base = check or InternalsCheck(release=NOT_CHECKED)
        known = {m.name for m in base.missing}
        extra = [m for name, m in self.missing.items() if name not in known]
        return base.model_copy(update={"missing": [*base.missing, *extra]}) if extra else base
