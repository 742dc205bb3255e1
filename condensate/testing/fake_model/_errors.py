"""The one exception the request checks share, kept apart so pure modules need no aiohttp."""


class BadRequest(Exception):
    """A body the real API would reject with 400; each API renders it in its own shape."""
