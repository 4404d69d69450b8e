"""The image's build file (``/opt/b12x-launch/build.json``): written once when the image is
built, read by every container start for the build id in force. Standard library only at
import (the entry point imports this on every start); the file's type
(``launcher.contract.build``, pydantic) is loaded when one is read or written. The id itself
is ``launcher.buildid``'s.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from launcher.buildid import (
    BUILD_ID_ENV,
    BUILD_INFO_ENV,
    DEFAULT_BUILD_INFO,
    EPOCH_ENV,
    BuildIdError,
    build_info,
    checked_id,
    moved,
)


def write_build_info(path: str | os.PathLike, env: Mapping[str, str] | None = None) -> str:
    """Compute the build info and write it to ``path`` (run once, at image build time)."""
    from launcher.contract.build import BuildInfo  # at image build time only
    from launcher.owned.write import write_text

    info = BuildInfo.model_validate(build_info(env))
    write_text(path, json.dumps(info.to_json(), indent=2, sort_keys=True) + "\n")
    print(f"build id {info.build_id}: {json.dumps(info.versions, sort_keys=True)}")
    return info.build_id


def _stderr(line: str) -> None:
    print(f"b12x-launch: {line}", file=sys.stderr, flush=True)


def resolve_build(
    env: Mapping[str, str], say: Callable[[str], None] = _stderr
) -> tuple[str, dict[str, Any]]:
    """The build id in force: the variable, else the image's build-info file, else computed.

    Raises:
        BuildIdError: the build-info file cannot be read, or the id is no directory name.
    """
    override = env.get(BUILD_ID_ENV, "").strip()
    if override:
        return checked_id(override, BUILD_ID_ENV), {"build_id": override, "source": BUILD_ID_ENV}
    info_file = Path(env.get(BUILD_INFO_ENV) or DEFAULT_BUILD_INFO)
    if info_file.is_file():
        info = _read_build_file(info_file)
        build_id = info["build_id"]
        now = build_info({EPOCH_ENV: str(info.get("epoch") or "")})
        what = moved(info, now)
        if what:  # an image built FROM this one that changed a package keeps its build.json
            say(
                f"note: {info_file} was written for {', '.join(what)}; this image differs, "
                f"so its caches go under build {now['build_id']}"
            )
            return now["build_id"], {**now, "source": f"recomputed ({info_file} is stale)"}
        return checked_id(str(build_id), str(info_file)), info
    info = build_info(env)
    return info["build_id"], info


def _read_build_file(path: Path) -> dict[str, Any]:
    """The image's build file, typed (``launcher.contract.build``), as its JSON.

    Raises:
        BuildIdError: it is unreadable, damaged or of another layout (one line naming it).
    """
    from launcher.contract.base import ContractError, read_model
    from launcher.contract.build import BUILD_INFO_MAX, FIX, BuildInfo

    try:
        info = read_model(path, BuildInfo, "build file", limit=BUILD_INFO_MAX, fix=FIX)
    except ContractError as exc:
        raise BuildIdError(f"cannot read the build id from {path} ({exc.reason}); {FIX}") from None
    return info.to_json()
