"""A deployment's compiled caches and calibration records as one artifact (issue 43).

``b12x-launch bake PROFILE OUT`` writes it after a boot on the target cards (``bake.py``);
``b12x-launch PROFILE --cache-from ARTIFACT`` (or the container's ``BLAUNCH_CACHE_FROM``)
verifies it and restores it before vLLM starts (``restore.py``); an init container or a
compose service copies it onto a node's cache volume first (``seed.py``). What it holds and
for which deployment is its manifest (``manifest.py``), keyed by ``keys.py``.

The format, on disk (docs/operations.md, "A fresh node boots warm"): a directory

    OUT/manifest.json          the typed manifest (keys, per-file sha256 and size, totals)
    OUT/files/<cache>/<path>   each file, at its path under runtime.cache_root

or the same two names as members of one tar (``OUT.tar``, ``OUT.tar.gz``), the manifest
first. Nothing else is in it: a member the manifest does not list is refused.

This module holds names only (the container's entry point imports it on every start).
"""

from __future__ import annotations

from launcher.errors import LauncherError

MANIFEST_NAME = "manifest.json"
FILES_DIR = "files"
TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz")
"""An artifact path ending in one of these is a tar; anything else is a directory."""

CACHE_FROM_ENV = "BLAUNCH_CACHE_FROM"
"""The container's entry point restores this artifact before a launch (``--cache-from``);
``none`` turns off the one built into the image."""
BUILTIN_ARTIFACT = "/opt/b12x-launch/artifact"
"""Where the Dockerfile's ``artifact`` stage puts an artifact inside the image; restored when
it holds a manifest and ``BLAUNCH_CACHE_FROM`` is unset."""
SEED_DIR = "artifacts"
"""Under the cache volume (``/cache/artifacts/<name>``): where an init container or a compose
service copies an artifact for the launcher to restore."""
SOURCE_MOUNT = "/artifact-src"
"""Where the emitted init container or compose service mounts the artifact's source."""


def is_tar(path: str) -> bool:
    return path.endswith(TAR_SUFFIXES)


class ArtifactError(LauncherError):
    """An artifact that cannot be baked, read or restored here: one line naming the file or
    key, and the fix (exit 1, no traceback)."""
