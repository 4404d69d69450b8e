"""What the image's vLLM registers, recorded when the image is built
(``/opt/b12x-launch/vllm-registry.json``, ``BLAUNCH_VLLM_REGISTRY``).

The image build imports vLLM once, its plugins loaded, and writes its attention backends and
quantization methods with the versions it read them under; every container start reads the
record instead of importing vLLM (seconds). A record of other versions, another layout or a
damaged one tells nothing: the start then imports vLLM's registries.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA = "b12x-launch/vllm-registry/1"
REGISTRY_MAX = 4 << 20
"""A record lists a few hundred names; a larger file is not the image build's."""


class VllmRegistryRecord(BaseModel):
    """The installed vLLM's registries, as the image build read them (a contract type kept in
    the vLLM room, which sits below ``contract``: configured as ``contract.base.Frozen``)."""

    model_config = ConfigDict(
        extra="forbid", defer_build=True, allow_inf_nan=False, frozen=True, populate_by_name=True
    )

    schema_id: Literal["b12x-launch/vllm-registry/1"] = Field(SCHEMA, alias="schema")
    """This layout's name and version (``schema``)."""
    versions: dict[str, str | None] = Field(default_factory=dict)
    """The keyed distributions' versions it was read under (``launcher.buildid``): a record
    of others is not used."""
    attention_backends: list[str] = Field(default_factory=list)
    """vLLM's attention backends (``AttentionBackendEnum``'s members), sorted."""
    quantizations: list[str] = Field(default_factory=list)
    """vLLM's quantization methods, sorted."""

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)
