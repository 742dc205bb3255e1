"""The engines this daemon runs: those installed under the ``condensate.engines`` entry-point
group, and each as the daemon's settings shape it (a ``Profile``).

An engine package registers its ``EngineInfo`` in its distribution's metadata::

    [project.entry-points."condensate.engines"]
    echo = "echo_engine:ENGINE"

so that a new engine needs no edit here or anywhere in the core.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import cache
from importlib.metadata import entry_points

from pydantic_settings import BaseSettings

from condensate.config import PREFIX, config_path, env_names, read_file, read_settings, unknown
from condensate.core.ceilings import CeilingSettings
from condensate.core.planner import PlannerSettings
from condensate.engine import EngineInfo, Engines, EngineSettings
from condensate.errors import ConfigError
from condensate.settings import Settings

GROUP = "condensate.engines"


@cache
def installed() -> Engines:
    """Every engine installed, by name; an entry that is not an ``EngineInfo``, or whose
    name is not its entry's, is a configuration error naming it."""
    found: dict[str, EngineInfo] = {}
    for point in entry_points(group=GROUP):
        info = point.load()
        if not isinstance(info, EngineInfo):
            msg = f"The engine entry point {point.name} = {point.value} is not an EngineInfo."
            raise ConfigError(msg)
        if info.name != point.name:
            msg = f"The engine entry point {point.name} names an engine called {info.name!r}."
            raise ConfigError(msg)
        found[info.name] = info
    return found


def names() -> list[str]:
    """The installed engines' names, without importing them (for the command line's help)."""
    return sorted({point.name for point in entry_points(group=GROUP)})


def default_engine(engines: Engines) -> str:
    """The engine a thread created without one runs on: the one that says it is the default,
    else the only one."""
    marked = sorted(name for name, info in engines.items() if info.default)
    if len(marked) == 1:
        return marked[0]
    if not marked and len(engines) == 1:
        return next(iter(engines))
    msg = f"No single default engine among {sorted(engines)} (marked: {marked})."
    raise ConfigError(msg)


def describe(info: EngineInfo) -> str:
    """What an engine declares, in one line (``condensate doctor``)."""
    traits = [
        f"ceiling {info.ceiling_share:.0%} of the window, at most {info.ceiling_cap:,} tokens",
        f"window check {info.checkpoints}",
        f"heads {info.heads}",
    ]
    if info.restarts:
        traits.append("a summary restarts its session")
    if info.default:
        traits.append("the default")
    return f"{info.title}: {'; '.join(traits)}"


@dataclass(frozen=True)
class Profile:
    """An engine as this daemon runs it: what it declares, its own settings, and what its
    threads are measured and planned with."""

    info: EngineInfo
    settings: EngineSettings
    ceilings: CeilingSettings
    planner: PlannerSettings


def profile(
    info: EngineInfo,
    ceilings: CeilingSettings,
    planner: PlannerSettings,
    own: EngineSettings | None = None,
) -> Profile:
    """``info`` under the daemon's ``ceilings`` and ``planner`` settings and its own (read
    from the environment when not given)."""
    own = read_settings(info.settings) if own is None else own
    shaped = replace(
        ceilings, share=info.ceiling_share, cap=info.ceiling_cap, cap_engine=own.ceiling_cap()
    )
    return Profile(info, own, shaped, replace(planner, heads=info.heads, restarts=info.restarts))


def profiles(
    engines: Engines, settings: Settings, own: Mapping[str, EngineSettings] | None = None
) -> dict[str, Profile]:
    """A profile per engine; ``own`` overrides what an engine's settings read."""
    given = own or {}
    ceilings, planner = settings.ceilings(), settings.planner()
    return {
        name: profile(info, ceilings, planner, given.get(name)) for name, info in engines.items()
    }


def profile_of(name: str, settings: Settings) -> Profile:
    """The installed engine ``name``'s profile (for a replay or a view outside the daemon)."""
    engines = installed()
    if name not in engines:
        msg = f"The engine {name!r} is not installed (installed: {', '.join(sorted(engines))})."
        raise ConfigError(msg)
    return profile(engines[name], settings.ceilings(), settings.planner())


CREDENTIALS: dict[str, tuple[tuple[str, ...], str]] = {
    "anthropic": (
        ("anthropic_api_key", "anthropic_auth_token"),
        "CONDENSATE_ANTHROPIC_API_KEY (or ANTHROPIC_API_KEY; a Claude subscription's token in "
        "CONDENSATE_ANTHROPIC_AUTH_TOKEN)",
    ),
    "openai": (("openai_api_key",), "CONDENSATE_OPENAI_API_KEY (or OPENAI_API_KEY)"),
}
"""Per provider: the settings that hold a credential for it, and how to name them."""
OTHER_NAMES = ("CONDENSATE_CONFIG", "CONDENSATE_MCP_TOKEN")
"""``CONDENSATE_*`` variables no settings model reads: the configuration file's path, and the
token the CLI engines hand their MCP server."""


def missing_credential(settings: Settings, provider: str) -> str | None:
    """How to give the daemon a credential for ``provider`` when it holds none; None when it
    holds one, or needs none (a Chat Completions server may take no key)."""
    if provider not in CREDENTIALS:
        return None
    fields, named = CREDENTIALS[provider]
    return None if any(getattr(settings, field) for field in fields) else named


def credential_warnings(settings: Settings, engines: Engines, where: str) -> list[str]:
    """A sentence for each engine whose provider has no credential (an engine that may reach
    any provider: when none has one). ``where`` names the configuration file."""

    def missing(provider: str) -> bool:
        return missing_credential(settings, provider) is not None

    out: list[str] = []
    for name, info in sorted(engines.items()):
        providers = info.providers or tuple(CREDENTIALS)
        lacking = [p for p in providers if missing(p)]
        if not lacking or (not info.providers and len(lacking) < len(providers)):
            continue
        wanted = " or ".join(CREDENTIALS[p][1] for p in lacking)
        out.append(
            f"The {name} engine's provider ({', '.join(lacking)}) has no credential: set "
            f"{wanted} in the daemon's environment or in {where}; until then its threads "
            "fail with 401."
        )
    return out


def known_variables(engines: Engines) -> set[str]:
    """Every ``CONDENSATE_*`` variable a setting reads (the daemon's and each engine's)."""
    kinds: list[type[BaseSettings]] = [Settings, *(info.settings for info in engines.values())]
    found = {
        name for kind in kinds for field in kind.model_fields for name in env_names(kind, field)
    }
    return found | set(OTHER_NAMES)


def unknown_variables(engines: Callable[[], Engines] = installed) -> list[str]:
    """A sentence for each ``CONDENSATE_*`` name in the environment or the configuration file
    that no setting reads (a misspelling, with the setting it is closest to). The engines are
    loaded only when a name is not one of the daemon's own: every command runs this first."""
    names = [n for n in (*os.environ, *read_file(config_path())) if n.startswith(PREFIX)]
    if all(n in known_variables({}) for n in names):
        return []
    return unknown(names, known_variables(engines()))


def setting_warnings(settings: Settings | None, engines: Engines) -> list[str]:
    """What the daemon says at start: misspelt variables, and engines whose provider has no
    credential (``settings`` None: not readable, said elsewhere)."""
    where = str(config_path())
    found = unknown_variables(lambda: engines)
    if settings is not None:
        found += credential_warnings(settings, engines, where)
    return found
