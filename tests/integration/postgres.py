"""A private PostgreSQL server for the tests and benchmarks: the distribution's binaries
(``apt-get install postgresql``, which ``scripts/setup`` runs on a machine without them), a data
directory and port of its own, listening on 127.0.0.1 only, stopped at the end. PostgreSQL
refuses to run as root, so under root it runs as the ``postgres`` user the package creates."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

USER = "condensate"


def binaries() -> Path:
    """Where ``initdb`` and ``pg_ctl`` are: on PATH, else the newest of Debian's versions."""
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=_version)
    if not versions:
        msg = (
            "PostgreSQL's server binaries are not installed (no initdb on PATH or under "
            "/usr/lib/postgresql): run scripts/setup as root, or apt-get install postgresql."
        )
        raise RuntimeError(msg)
    return versions[-1].parent


def _version(initdb: Path) -> int:
    name = initdb.parent.parent.name
    return int(name) if name.isdigit() else 0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _as_owner(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


@contextlib.contextmanager
def server(*, durable: bool = False) -> Iterator[str]:
    """A fresh server; yields its URL (trust authentication, loopback only). Not ``durable``
    (the tests): commits are not flushed to disk, which changes nothing a test can see."""
    bin_dir = binaries()
    base = Path(tempfile.mkdtemp(prefix="condensate-pg-"))
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        os.chown(base, owner.pw_uid, owner.pw_gid)
    data, port = base / "data", _free_port()
    try:
        subprocess.run(
            _as_owner(
                [str(bin_dir / "initdb"), "-D", str(data), "-U", USER, "--auth=trust", "-E", "UTF8"]
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )
        options = f"-p {port} -k {base} -c listen_addresses=127.0.0.1"
        if not durable:
            options += " -c fsync=off -c synchronous_commit=off"
        subprocess.run(
            _as_owner(
                [
                    str(bin_dir / "pg_ctl"),
                    "-D",
                    str(data),
                    "-o",
                    options,
                    "-l",
                    str(base / "server.log"),
                    "-w",
                    "start",
                ]
            ),
            check=True,
            capture_output=True,
            timeout=120,
        )
        try:
            yield f"postgresql://{USER}@127.0.0.1:{port}/postgres"
        finally:
            subprocess.run(
                _as_owner([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]),
                check=False,
                capture_output=True,
                timeout=60,
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)


def fresh_database(url: str, name: str) -> str:
    """A new, empty database on the server at ``url``: its URL."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    return url.rsplit("/", 1)[0] + f"/{name}"
