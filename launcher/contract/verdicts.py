"""The installed vLLM's verdicts a launch remembers
(``calibration/<fingerprint>/vllm-verdicts.json``).

A passed check's key (``launcher.launch.verdicts``: what was checked and the install, hashed),
newest last, so that the next launch on the same install skips the check. The file lies in the
store on the shared volume and ``bake`` carries it to a fresh node; an unreadable one only
costs the check again.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from launcher.contract.base import Frozen

FILE = "vllm-verdicts.json"
SCHEMA = "b12x-launch/vllm-verdicts/1"
KEPT = 16
"""Keys kept per plan, newest last (a node's installs change rarely)."""
VERDICTS_MAX = 64 << 10
"""KEPT keys of 64 hex digits take 1.5 KiB: a larger file is not the launcher's."""

VerdictKey = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class Verdicts(Frozen):
    """The checks the installed vLLM passed for one plan. A file without ``schema`` (written
    before the key was) has this layout."""

    schema_id: Literal["b12x-launch/vllm-verdicts/1"] = Field(SCHEMA, alias="schema")
    """This layout's name and version (``schema``)."""
    keys: list[VerdictKey] = Field(default_factory=list, max_length=KEPT)
    """Each passed check's key (a sha256), newest last."""

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)
