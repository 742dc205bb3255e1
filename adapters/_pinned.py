"""The CLIs the project pins (``claude``, ``codex``): which binary to run, and refusing another
version.

The binary is the one the engine's setting names; else a source checkout's
``node_modules/.bin`` (what ``npm ci`` installs); else the first on ``PATH`` or in the places
``npm install -g`` puts a CLI. Those places are worked out without running npm (a start must
not wait on it), because under systemd ``PATH`` is short and a ``pipx`` install has no
checkout: npm's prefix as its environment (``NPM_CONFIG_PREFIX``) or user config
(``~/.npmrc``'s ``prefix=``) sets it, the directory of the ``node`` on ``PATH`` (npm's
default prefix is node's own), ``~/.npm-global/bin`` (npm's documented user prefix),
``~/.local/bin`` and nvm's nodes, newest first. ``/usr/local/bin`` and ``/usr/bin`` are on
every ``PATH``, systemd's included.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from condensate.errors import ConfigError

REPO = Path(__file__).resolve().parents[1]
"""A source checkout's root (in an installed package: site-packages, with no npm files)."""
VERSION = re.compile(r"\d+\.\d+\.\d+")
NPM_PREFIX_VARIABLES = ("NPM_CONFIG_PREFIX", "npm_config_prefix")
NPM_USERCONFIG_VARIABLES = ("NPM_CONFIG_USERCONFIG", "npm_config_userconfig")

_versions: dict[str, str] = {}


def _expanded(value: str, environ: Mapping[str, str], home: Path) -> Path:
    """A path as npm reads one from its config: ``${VAR}`` from the environment, ``~`` home."""
    value = re.sub(r"\$\{([^}]*)\}", lambda found: environ.get(found.group(1), ""), value)
    if value == "~" or value.startswith("~/"):
        value = str(home) + value[1:]
    return Path(value)


def npm_prefix(environ: Mapping[str, str], home: Path) -> Path | None:
    """The global prefix npm's environment or user config sets, if either does."""
    for name in NPM_PREFIX_VARIABLES:
        if environ.get(name):
            return _expanded(environ[name], environ, home)
    userconfig = next((environ[n] for n in NPM_USERCONFIG_VARIABLES if environ.get(n)), "")
    npmrc = _expanded(userconfig, environ, home) if userconfig else home / ".npmrc"
    try:
        lines = npmrc.read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    for line in lines:
        key, equals, value = line.partition("=")
        if equals and key.strip() == "prefix" and value.strip():
            return _expanded(value.strip().strip("\"'"), environ, home)
    return None


def _nvm_bins(environ: Mapping[str, str], home: Path) -> list[Path]:
    """nvm's nodes' bin directories, newest version first."""
    root = _expanded(environ["NVM_DIR"], environ, home) if environ.get("NVM_DIR") else None
    versions = (root or home / ".nvm") / "versions" / "node"
    try:
        found = [entry / "bin" for entry in versions.iterdir() if entry.is_dir()]
    except OSError:
        return []

    def version(path: Path) -> tuple[int, ...]:
        return tuple(int(part) for part in re.findall(r"\d+", path.parent.name))

    return sorted(found, key=version, reverse=True)


def npm_bin_dirs(environ: Mapping[str, str], home: Path) -> list[Path]:
    """Where ``npm install -g`` may have put a CLI, beyond ``PATH``, most specific first."""
    places: list[Path] = []
    prefix = npm_prefix(environ, home)
    if prefix is not None:
        places.append(prefix / "bin")
    node = shutil.which("node", path=environ.get("PATH", ""))
    if node is not None:
        places.append(Path(node).resolve().parent)
    places += [home / ".npm-global" / "bin", home / ".local" / "bin", *_nvm_bins(environ, home)]
    return list(dict.fromkeys(places))


def find(command: str, environ: Mapping[str, str], home: Path) -> str | None:
    """``command`` (a name or a path) on ``PATH`` or in npm's places, or None."""
    search = [environ.get("PATH", ""), *map(str, npm_bin_dirs(environ, home))]
    return shutil.which(command, path=os.pathsep.join(part for part in search if part))


@dataclass(frozen=True)
class PinnedCli:
    """A CLI the project pins in ``package.json``: ``claude`` or ``codex``."""

    command: str
    """The executable's name in ``node_modules/.bin`` and on PATH."""
    label: str
    """What people call it: "Claude Code", "Codex"."""
    package: str
    """Its npm package."""
    pinned: str
    setting: str
    """The ``CONDENSATE_*`` variable that points at another binary."""

    @property
    def minor(self) -> str:
        """The major.minor a binary must have: ``2.1`` for ``2.1.332``."""
        return self.pinned.rsplit(".", 1)[0]

    @property
    def install_hint(self) -> str:
        """What to install, where, and the setting that names an existing binary."""
        spec = f"{self.package}@{self.pinned}"
        hint = (
            f"install it with `npm install -g {spec}` (a user who cannot write npm's prefix: "
            f"`npm install -g --prefix ~/.local {spec}`, which puts it in ~/.local/bin)"
        )
        if (REPO / "package.json").exists():
            hint += f", or run `npm ci` in {REPO} (it installs the pinned {spec})"
        return f"{hint}, or set {self.setting} to an existing `{self.command}` {self.minor}.x"

    def resolve(
        self,
        configured: str | None,
        environ: Mapping[str, str] | None = None,
        home: Path | None = None,
    ) -> str:
        """The CLI to run: the setting, else the checkout's pinned one, else the first on
        PATH or in npm's places (of ``environ`` and ``home``: by default the process's)."""
        environ = os.environ if environ is None else environ
        home = Path.home() if home is None else home
        if configured:
            found = find(configured, environ, home)
            if found is None:
                msg = f"{self.setting}={configured!r} is not an executable; {self.install_hint}."
                raise ConfigError(msg)
            return found
        pinned = REPO / "node_modules" / ".bin" / self.command
        if pinned.exists():
            return str(pinned)
        found = find(self.command, environ, home)
        if found is None:
            places = ", ".join(str(p) for p in npm_bin_dirs(environ, home))
            msg = (
                f"The {self.label} CLI (`{self.command}`) was not found on PATH nor in "
                f"{places}; {self.install_hint}."
            )
            raise ConfigError(msg)
        return found

    def check_version(self, binary: str) -> str:
        """``BINARY --version``'s version, once per binary; refuses another major.minor."""
        if binary in _versions:
            return _versions[binary]
        try:
            done = subprocess.run(  # noqa: S603 - the operator's configured binary
                [binary, "--version"], capture_output=True, text=True, timeout=30, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            msg = f"Could not run {binary} --version ({exc}); {self.install_hint}."
            raise ConfigError(msg) from exc
        found = VERSION.search(done.stdout)
        version = found.group(0) if found else ""
        if done.returncode != 0 or version.rsplit(".", 1)[0] != self.minor:
            shown = version or done.stderr.strip()[:200] or f"exit {done.returncode}"
            msg = (
                f"{binary} is {self.label} {shown!r}, but Condensate drives {self.minor}.x "
                f"(pinned {self.pinned}); {self.install_hint}."
            )
            raise ConfigError(msg)
        _versions[binary] = version
        return version
