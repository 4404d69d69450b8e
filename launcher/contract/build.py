"""The image's build file (``/opt/b12x-launch/build.json``): its build id and what the id was
computed from.

Written once when the image is built (``launcher.buildfile.write_build_info``) and read by every
container start (``launcher.buildfile.resolve_build``). A file without ``schema`` (an image built
before the key was) has this layout; one of another layout is refused, naming the file.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from launcher.contract.base import Frozen

SCHEMA = "b12x-launch/build-info/1"
BUILD_INFO_MAX = 1 << 20
"""A build file lists a few versions; a larger one is not the image's."""
FIX = "rebuild the image, or set BLAUNCH_BUILD_ID"


class BuildInfo(Frozen):
    """The image's build id and its inputs."""

    schema_id: Literal["b12x-launch/build-info/1"] = Field(SCHEMA, alias="schema")
    """This layout's name and version (``schema``)."""
    build_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
    """The id: a directory name (``/cache/<build id>``), the readable vLLM and b12x versions
    and a hash of the fields below."""
    versions: dict[str, str | None] = Field(default_factory=dict)
    """Each keyed distribution's version (None: not installed)."""
    python: str = ""
    """The Python version the image runs."""
    machine: str = ""
    """The machine (``platform.machine()``)."""
    epoch: str = ""
    """``BLAUNCH_CACHE_EPOCH`` at build time (bumped to start every cache afresh)."""

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)
