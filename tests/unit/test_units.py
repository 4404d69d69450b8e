import pytest

from launcher.units import GiB, MiB, format_size, parse_size


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("512MiB", 512 * MiB),
        ("95.01GiB", int(95.01 * GiB)),
        ("2G", 2 * 10**9),
        ("2GB", 2 * 10**9),
        ("1024", 1024),
        (4096, 4096),
        ("1.5 GiB", int(1.5 * GiB)),
    ],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["", "abc", "-1GiB", "1 parsec", True, -5, float("nan")])
def test_parse_size_rejects(bad):
    with pytest.raises(ValueError):
        parse_size(bad)


def test_format_size_round_trips_binary_units():
    assert format_size(1536 * MiB) == "1.50 GiB"
    assert format_size(512 * MiB) == "512.00 MiB"
    assert parse_size(format_size(3 * GiB).replace(" ", "")) == 3 * GiB
