"""``emit``'s record of the files it wrote into an output directory
(``b12x-launch-emit.manifest``, beside them).

Each file's name and the sha256 of what emit wrote, with the plan they carry: the next emit
into the directory writes over or deletes only a listed file that still has those bytes. A
name is a plain file name directly in the directory, so a forged manifest cannot point emit
anywhere else.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from launcher.contract.base import Frozen

MANIFEST = "b12x-launch-emit.manifest"
"""No ``.yaml``/``.json`` suffix, so ``kubectl apply -f DIR`` passes it by."""
SCHEMA = "b12x-launch/emit-manifest/1"
MANIFEST_MAX = 1 << 20
"""A manifest lists a few files; a larger one is not emit's."""
FIX = "remove it (emit then takes no file there as its own), or emit into another directory"


def _plain_name(name: str) -> str:
    if "/" in name or "\\" in name or "\x00" in name or name in (".", ".."):
        raise ValueError(f"not a file name directly in the directory: {name!r}")
    return name


FileName = Annotated[str, Field(min_length=1, max_length=255), AfterValidator(_plain_name)]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class EmitManifest(Frozen):
    """What one emit wrote into its directory."""

    schema_id: Literal["b12x-launch/emit-manifest/1"] = Field(SCHEMA, alias="schema")
    """This layout's name and version (``schema``)."""
    fingerprint: str = ""
    """The plan the listed files carry ("" when there is no manifest)."""
    files: dict[FileName, Sha256] = Field(default_factory=dict)
    """Each file's name and the sha256 of the content emit wrote, sorted by name."""

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)
