"""Files written whole or not at all (``launcher.owned.write``, under its older name)."""

from __future__ import annotations

from launcher.owned.write import write_bytes, write_json, write_text

__all__ = ["write_bytes", "write_json", "write_text"]
