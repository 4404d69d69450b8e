"""The one owned-files boundary: what the launcher writes, replaces, deletes, and reads across
a trust line.

A tree the launcher owns has a root (a cache root, a run directory, an emit directory, an
artifact) and a record of what it made there (an artifact's manifest, emit's manifest, a
restore's journal: paths, sizes, sha256). Below its root:

- a path is resolved one component at a time without following a link (``paths.inside``); a
  path outside the root, or through a link, is refused (``Refused``);
- a file is written atomically (a temporary file beside it, fsync, rename), and a copy stops
  at its size limit while it copies (``write``);
- a file is replaced or deleted only when its record lists it and its bytes still have the
  recorded sha256 (``remove``);
- what crosses a trust line (a journal, a marker, a record, a manifest) is read bounded, from a
  regular file reached without a link, and typed (``read``).

No other module of the launcher unlinks, renames or removes a tree on its own
(``tests/unit/test_architecture.py`` fails if one does). The root itself is the operator's
choice and may be a link; nothing below it is followed.
"""

from __future__ import annotations

from launcher.errors import LauncherError


class Refused(LauncherError, ValueError):
    """A path outside its root or through a link, or a file the launcher did not make: the
    message names the path and why (the user's to fix: exit 1, no traceback)."""
