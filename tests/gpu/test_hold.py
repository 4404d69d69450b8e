"""The serving hold on a real card (``tests/gpu/hold_check.py``): the hold adds new segments
of the size asked, even where a cached block is larger, and serving draws on them."""

from __future__ import annotations

import pytest

from tests.gpu.hold_check import CASES, check


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_hold_adds_its_size_and_serving_draws_on_it(name):
    from tests.conftest import need, need_module

    torch = need_module("gpu", "torch", "the hold is torch's caching allocator")
    need("gpu", torch.cuda.is_available(), "no CUDA device")
    assert check(name) == []
