"""The configuration file: one source of settings for the daemon and the command line.

Every setting is read from the environment first, then from one file of ``NAME=VALUE`` lines:
``$CONDENSATE_CONFIG``, else ``$XDG_CONFIG_HOME/condensate/env``, else
``~/.config/condensate/env``, which is the file the systemd unit reads as its
``EnvironmentFile``, so the daemon under systemd, the daemon in a terminal and every command
see the same values. The syntax is systemd's: blank lines and lines starting with ``#`` or
``;`` are ignored, a value may be quoted with ``"`` or ``'``.

This module reads and writes that file and says where each setting came from; it does not
validate values (the settings' own models do, naming the variable).
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import AliasChoices, ValidationError
from pydantic_settings import BaseSettings, SettingsError

from condensate.errors import ConfigError

CONFIG_VARIABLE = "CONDENSATE_CONFIG"
PREFIX = "CONDENSATE_"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def config_path(environ: Mapping[str, str] | None = None) -> Path:
    """Where the configuration file is (it need not exist)."""
    env = os.environ if environ is None else environ
    named = env.get(CONFIG_VARIABLE)
    if named:
        return Path(named).expanduser()
    xdg = env.get("XDG_CONFIG_HOME")
    base = Path(xdg) if xdg else Path.home() / ".config"
    return base / "condensate" / "env"


@dataclass(frozen=True)
class Line:
    """One setting of the file: its value and its line number."""

    value: str
    number: int


def parse(text: str, where: str) -> dict[str, Line]:
    """The settings a file's text holds; a line that is no ``NAME=VALUE`` is one sentence
    naming the file and the line."""
    found: dict[str, Line] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        name, sep, value = line.partition("=")
        name = name.strip()
        if not sep or not _NAME.fullmatch(name):
            msg = (
                f"{where}, line {number}: {raw.strip()[:60]!r} is not NAME=VALUE (one setting "
                "a line, as systemd's EnvironmentFile reads it)."
            )
            raise ConfigError(msg)
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        found[name] = Line(value, number)
    return found


def read_file(path: Path) -> dict[str, Line]:
    """The file's settings (none when it does not exist); an unreadable file is one sentence."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        msg = f"The configuration file {path} cannot be read: {exc}."
        raise ConfigError(msg) from exc
    return parse(text, str(path))


Read = TypeVar("Read", bound=BaseSettings)


def read_settings(kind: type[Read]) -> Read:
    """``kind``'s settings: the environment, then the configuration file; a bad value is one
    sentence naming its variable and where it was set."""
    path = config_path()
    under = {name: line.value for name, line in read_file(path).items() if name not in os.environ}
    try:
        with _beneath_environment(under):
            return kind(_env_file=None)
    except ValidationError as exc:
        problems = "; ".join(_problem(kind, error, path) for error in exc.errors())
        msg = f"Invalid settings: {problems}."
        raise ConfigError(msg) from exc
    except SettingsError as exc:
        # A JSON-valued setting that is not JSON: pydantic-settings names only the field.
        named = re.search(r'field "(\w+)"', str(exc))
        field = named[1] if named else ""
        error = {"loc": (field,), "msg": "not valid JSON"}
        msg = f"Invalid settings: {_problem(kind, error, path)}."
        raise ConfigError(msg) from exc


@contextmanager
def _beneath_environment(values: Mapping[str, str]) -> Iterator[None]:
    """The file's values as the environment while a settings model reads it: the file is
    parsed here, by systemd's rules, not by pydantic-settings' dotenv reader, whose inline
    ``#`` comments and escapes systemd's EnvironmentFile does not know (the daemon under
    systemd and every command must read one value). Called at a process's start and by the
    command line, never while other threads read the environment."""
    os.environ.update(values)
    try:
        yield
    finally:
        for name in values:
            os.environ.pop(name, None)


def _problem(kind: type[BaseSettings], error: Any, path: Path) -> str:
    field = str(error["loc"][0]) if error["loc"] else ""
    names = env_names(kind, field) if field in kind.model_fields else (field.upper(),)
    where = source(names, os.environ, path, read_file(path))
    if where == "default":
        return f"{names[0]}: {error['msg']}"
    at = "the environment" if where == "environment" else where
    return f"{names[0]} (set in {at}): {error['msg']}"


def env_names(kind: type[BaseSettings], field: str) -> tuple[str, ...]:
    """The variables a setting is read from, the first the one to name."""
    alias = kind.model_fields[field].validation_alias
    if isinstance(alias, AliasChoices):
        return tuple(str(choice) for choice in alias.choices)
    if isinstance(alias, str):
        return (alias,)
    prefix = str(kind.model_config.get("env_prefix") or "")
    return (f"{prefix}{field}".upper(),)


def layered(environ: Mapping[str, str], path: Path) -> dict[str, str]:
    """The environment over the file: what the settings are read from."""
    return {**{k: v.value for k, v in read_file(path).items()}, **environ}


def source(
    names: Iterable[str], environ: Mapping[str, str], path: Path, lines: Mapping[str, Line]
) -> str:
    """Where a setting read under any of ``names`` came from: the environment, the file
    (``lines``, read from ``path``) with its line, or its default."""
    for name in names:
        if name in environ:
            return "environment"
    for name in names:
        if name in lines:
            return f"{path}:{lines[name].number}"
    return "default"


def unknown(names: Iterable[str], known: Iterable[str]) -> list[str]:
    """A sentence for each ``CONDENSATE_*`` name no setting reads, with the closest one."""
    known_names = sorted(set(known))
    out: list[str] = []
    for name in sorted(set(names)):
        if not name.startswith(PREFIX) or name in known_names:
            continue
        # Compared without the prefix every name shares, which would make any two alike.
        suffixes = {k.removeprefix(PREFIX): k for k in known_names}
        close = difflib.get_close_matches(name.removeprefix(PREFIX), suffixes, n=1, cutoff=0.7)
        hint = f"; did you mean {suffixes[close[0]]}?" if close else "; no setting reads it."
        out.append(f"{name} is not a Condensate setting{hint}")
    return out


def write(path: Path, name: str, value: str | None) -> None:
    """Set ``name`` to ``value`` in the file (None: remove it), keeping every other line;
    the file is created private (0600) in a private directory."""
    lines: list[str] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    kept: list[str] = []
    done = False
    for raw in lines:
        key = raw.strip().partition("=")[0].strip()
        if key == name and not raw.strip().startswith(("#", ";")):
            if value is not None and not done:
                kept.append(f"{name}={_quoted(value)}")
                done = True
            continue
        kept.append(raw)
    if value is not None and not done:
        kept.append(f"{name}={_quoted(value)}")
    temporary = path.with_name(path.name + ".new")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write("\n".join(kept) + "\n")
    temporary.replace(path)


def _quoted(value: str) -> str:
    """A value as the file keeps it: quoted when it has blanks, or is empty or starts like a
    comment or a quote."""
    if not value or any(c.isspace() for c in value) or value[0] in "\"'#;":
        return f'"{value}"'
    return value


SECRET_WORDS = ("KEY", "TOKEN", "PASSWORD", "SECRET")


def shown(name: str, value: object) -> str:
    """A setting's value as ``condensate config`` prints it: secrets cut to their last four
    characters, a database URL without its password."""
    text = "" if value is None else str(value)
    # Whole words: CONDENSATE_CLAMP_TOKENS is a count, not a token.
    if any(word in SECRET_WORDS for word in name.split("_")):
        if not text or text == "none":
            return text
        return f"…{text[-4:]}" if len(text) > 8 else "…"
    if name.endswith("DATABASE_URL"):
        return re.sub(r"://([^:/@]+):[^@]*@", r"://\1:…@", text)
    return text
