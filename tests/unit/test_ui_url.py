"""The status page's address as ``condensate ui`` prints it: the daemon's URL, ``/ui``, and
the token in the fragment; a daemon bound to every address is reached on loopback."""

from __future__ import annotations

import pytest

from condensate.http import ui


@pytest.mark.parametrize(
    ("daemon", "page"),
    [
        ("http://127.0.0.1:4741", "http://127.0.0.1:4741/ui#token=tok"),
        ("http://127.0.0.1:4741/", "http://127.0.0.1:4741/ui#token=tok"),
        ("http://0.0.0.0:4741", "http://127.0.0.1:4741/ui#token=tok"),
        ("http://[::]:4741", "http://[::1]:4741/ui#token=tok"),
        ("http://[::1]:9000", "http://[::1]:9000/ui#token=tok"),
    ],
)
def test_the_pages_address_carries_the_token_in_its_fragment(daemon: str, page: str) -> None:
    """The page's address is the daemon's, on loopback for a wildcard bind, token after #."""
    assert ui.url(daemon, "tok") == page
