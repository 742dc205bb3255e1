"""A small synchronous client for the daemon's HTTP API, for the command line.

It finds the daemon by itself: ``CONDENSATE_URL``, else the ``daemon.json`` the daemon writes
into its state directory, else the configured host and port; the token comes from the state
directory.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from condensate.errors import CondensateError
from condensate.settings import Settings


class DaemonError(CondensateError):
    """The daemon answered with an error, or could not be reached."""

    def __init__(self, *, code: str, detail: str, status: int = 0) -> None:
        super().__init__(detail)
        self.code = code
        self.status = status


@dataclass(frozen=True)
class DaemonClient:
    url: str
    token: str
    timeout: float = 60.0

    @classmethod
    def find(cls, settings: Settings) -> DaemonClient:
        url = settings.url
        if url is None:
            found = settings.home / "daemon.json"
            if found.exists():
                url = json.loads(found.read_text())["url"]
            else:
                url = f"http://{settings.host}:{settings.port}"
        token_file = settings.home / "token"
        if not token_file.exists():
            msg = (
                f"No token at {token_file}: start the daemon first (condensate serve), or set "
                "CONDENSATE_HOME to its state directory."
            )
            raise DaemonError(code="no-token", detail=msg)
        return cls(url.rstrip("/"), token_file.read_text().strip())

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(  # noqa: S310 - the URL is the daemon's, http only
            self.url + path,
            data=data,
            method=method,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as exc:
            try:
                payload = json.loads(exc.read())
            except ValueError:
                payload = {"error": "http-error", "detail": str(exc)}
            raise DaemonError(
                code=payload.get("error", "http-error"),
                detail=payload.get("detail", str(exc)),
                status=exc.code,
            ) from exc
        except (urllib.error.URLError, OSError) as exc:
            msg = f"Cannot reach the daemon at {self.url}: {exc}. Is 'condensate serve' running?"
            raise DaemonError(code="unreachable", detail=msg) from exc
