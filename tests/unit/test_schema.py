"""The schema documents itself: every field has a description (its docstring)."""

from pydantic import BaseModel

from launcher.profile.schema import Profile, json_schema


def walk(model: type[BaseModel], prefix=""):
    for name, field in model.model_fields.items():
        yield f"{prefix}{name}", field
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            yield from walk(ann, f"{prefix}{name}.")


def test_every_field_has_a_docstring():
    missing = [name for name, field in walk(Profile) if not field.description]
    assert missing == []


def test_json_schema_forbids_unknown_keys():
    schema = json_schema()
    assert schema["additionalProperties"] is False
    assert schema["$defs"]["Serving"]["additionalProperties"] is False
    assert "description" in schema["$defs"]["Serving"]["properties"]["max_model_len"]
