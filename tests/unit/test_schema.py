"""The schema documents itself: every field has a description (its docstring)."""

from pydantic import BaseModel

from launcher.profile.schema import Profile, describe_fields, json_schema


def walk(model: type[BaseModel], prefix=""):
    for name, field in model.model_fields.items():
        yield f"{prefix}{name}", field
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            yield from walk(ann, f"{prefix}{name}.")


def test_every_field_has_a_docstring():
    describe_fields()
    missing = [name for name, field in walk(Profile) if not field.description]
    assert missing == []


def test_json_schema_forbids_unknown_keys():
    schema = json_schema()
    assert schema["additionalProperties"] is False
    assert schema["$defs"]["Serving"]["additionalProperties"] is False
    assert "description" in schema["$defs"]["Serving"]["properties"]["max_model_len"]


def test_descriptions_are_the_docstrings_and_validation_keeps_working():
    schema = json_schema()
    hardware = schema["$defs"]["Hardware"]["properties"]
    assert hardware["count"]["description"] == "GPUs per node that this deployment uses."
    assert schema["properties"]["hardware"]["description"] == "The GPUs."
    assert schema["properties"]["hardware"]["default"]["count"] == 1
    profile = Profile.model_validate({"model": {"path": "x"}, "serving": {"max_model_len": 8}})
    assert profile.hardware == Profile.model_fields["hardware"].default
    assert profile.hardware.count == 1 and profile.prewarm.providers == ["b12x", "vllm", "triton"]
