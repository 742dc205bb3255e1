"""The ``codex`` CLI's set-up for one thread: which binary (the pinned version, or refused), the
thread's ``CODEX_HOME`` with its generated ``config.toml`` and model catalog, and the
environment ``codex app-server`` runs in. It knows nothing of turns or of the log.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from adapters import _child, _pinned
from condensate.config import config_path
from condensate.core.context_tools import offered
from condensate.engine import (
    EngineEnv,
    EngineSettings,
    Launch,
    ThreadSpec,
    mcp,
    own_settings,
)
from condensate.errors import ConfigError, Refused
from condensate.providers import parse_model

STATE_DIR = "codex"
"""Each thread's CLI state is ``$CONDENSATE_HOME/codex/<thread>`` (removed at daemon start)."""
PINNED_VERSION = "0.171.0"
"""The version ``package.json`` pins; a CLI of another major.minor is refused."""
CLI = _pinned.PinnedCli(
    command="codex",
    label="Codex",
    package="@openai/codex",
    pinned=PINNED_VERSION,
    setting="CONDENSATE_CODEX_BINARY",
)
PROVIDER = "condensate"
"""The model provider the generated config defines (the daemon's OpenAI endpoint)."""
KEY_VARIABLE = "CODEX_PROVIDER_API_KEY"
"""The variable Codex reads the provider's key from (``env_key``): the key stays out of the
config file."""
OUT_OF_REACH = 100_000_000
"""The catalog window that keeps Codex's own compaction (at 90 % of it) from ever firing:
Condensate's ceiling, and the provider's refusal, come long before."""
TEMPLATE_SLUG = "gpt-5.5"
"""The bundled entry an unknown model's entry is copied from."""
SANDBOXES = frozenset({"read-only", "workspace-write", "danger-full-access"})

check_version = CLI.check_version


class CodexSettings(EngineSettings):
    codex_binary: str | None = None
    """``CONDENSATE_CODEX_BINARY``: the ``codex`` CLI (default: a checkout's pinned
    ``node_modules/.bin/codex``, else PATH, else where npm installs a CLI: ``_pinned``)."""
    codex_windowing: bool = True
    """``CONDENSATE_CODEX_WINDOWING``: ``0`` hands compaction back to Codex (applied when a
    Codex session restarts)."""
    window_ceiling_pi: int | None = Field(default=None, gt=0)
    """``CONDENSATE_WINDOW_CEILING_PI``: the operator's cap on Codex's ceiling (the same
    variable caps the native loop's)."""

    def ceiling_cap(self) -> int | None:
        return self.window_ceiling_pi

    def windowing(self) -> bool:
        return self.codex_windowing


def settings_of(env: EngineEnv) -> CodexSettings:
    """The engine's settings: those the daemon gave, else the environment's."""
    return own_settings(CodexSettings, env.settings)


def doctor(settings: EngineSettings) -> str:
    """The binary the settings name and its version; raises ``ConfigError`` saying why not."""
    own = own_settings(CodexSettings, settings)
    binary = resolve_binary(own.codex_binary)
    return f"{check_version(binary)} ({binary})"


def resolve_binary(configured: str | None) -> str:
    """The CLI to run: the setting, the repo's pinned one, or ``codex`` on PATH; and when that
    is npm's node wrapper, the native binary it would start. On node 20 the wrapper runs it as
    a child and a SIGKILL to the wrapper leaves the child holding our pipes."""
    binary = CLI.resolve(configured)
    return str(native_binary(Path(binary)) or binary)


def native_binary(binary: Path) -> Path | None:
    """The native ``codex`` of npm's ``bin/codex.js``, in its platform package: beside it (a
    checkout's ``npm ci``) or nested in it (``npm install -g`` keeps a package's own)."""
    script = binary.resolve()
    if script.suffix != ".js":
        return None
    package = script.parent.parent
    beside = package.parent.glob("codex-*/vendor")
    nested = (package / "node_modules" / package.parent.name).glob("codex-*/vendor")
    for vendor in (*beside, *nested, package / "vendor"):
        for native in sorted(vendor.glob("*/bin/codex")):
            return native
    return None


SANDBOX_OF = {
    "default": "danger-full-access",
    "workspace": "workspace-write",
    "read-only": "read-only",
    "ask": "workspace-write",
    **{name: name for name in SANDBOXES},
}
"""A thread's permissions as a Codex sandbox (Codex's own names pass through); approvals are
never asked for. ``default`` is ``danger-full-access``: Condensate answers no approval
prompts, so an unattended thread runs without them (as Claude Code threads run with
``bypassPermissions``). ``workspace-write`` and ``read-only`` run under Condensate's
permission profile (``permission_profile``), which Codex's bundled bubblewrap enforces for
reads as well as writes. ``ask`` runs in the workspace sandbox with approvals on
(``approval_policy``)."""
PROFILE = "condensate"
"""The permission profile the config of a confined thread defines and selects."""
CWD_ACCESS = {"read-only": "read", "workspace-write": "write"}
"""What a confined sandbox's commands may do in cwd (Codex's workspace roots)."""


def approval_policy(permissions: str) -> str:
    """``untrusted`` for ``ask``: Codex asks before every command it does not know to be
    read-only, and Condensate hands each request to the operator (``on-request`` would let
    any command the sandbox allows run unasked). ``never`` otherwise: nobody is there to
    answer."""
    return "untrusted" if permissions == "ask" else "never"


def sandbox_mode(permissions: str) -> str:
    """The Codex sandbox of ``permissions`` (``check`` refused any other at creation)."""
    check_permissions(permissions)
    return SANDBOX_OF[permissions]


def check_permissions(permissions: str) -> None:
    if permissions not in SANDBOX_OF:
        known = ", ".join(repr(p) for p in SANDBOX_OF)
        raise Refused(
            code="unsupported-permissions",
            detail=f"The codex engine cannot enforce permissions {permissions!r}; it enforces "
            f"{known}.",
        )


def check(spec: ThreadSpec) -> None:
    """Refuse, before the thread exists, what Codex cannot enforce: a permissions value with
    no sandbox, and any ``tools`` list (Codex keeps its own tool set and has no way to offer
    fewer)."""
    check_permissions(spec.permissions)
    if spec.tools:
        raise Refused(
            code="unsupported-tools",
            detail="The codex engine cannot limit Codex's tools (it keeps its own set: "
            "exec_command, apply_patch, ...); create the thread without 'tools', or "
            "limit what it may touch with 'permissions' (workspace, read-only).",
        )


def model_slug(spec: ThreadSpec) -> str:
    """The model Codex asks the provider for; Codex speaks only the Responses API."""
    model = parse_model(spec.model)
    if model.provider != "openai":
        msg = (
            f"The codex engine speaks the OpenAI Responses API; {spec.model!r} is not an "
            "openai: model (e.g. openai:gpt-5.5)."
        )
        raise ConfigError(msg)
    return model.name


def _toml(value: Any) -> str:
    """A TOML value. JSON's strings, numbers, booleans and arrays are valid TOML."""
    return json.dumps(value)


def base_url(env: EngineEnv) -> str:
    """The daemon's gateway when there is one, else the provider itself."""
    return env.openai_base_url if env.gateway is None else env.gateway.url


def profile_name(permissions: str) -> str:
    """The permission profile a thread's config selects: Condensate's own for a confined
    thread, Codex's built-in one for ``danger-full-access``."""
    return PROFILE if sandbox_mode(permissions) in CWD_ACCESS else ":danger-full-access"


def unreadable(home: Path) -> list[Path]:
    """What no confined command may read even inside cwd: the daemon's state directory (its
    token, the log, every CLI's home) and the configuration file (settings, provider keys),
    each by its path and by where a symlink leads."""
    paths = (home, config_path())
    return sorted({p.absolute() for p in paths} | {p.resolve() for p in paths})


def runtime(binary: str) -> list[Path]:
    """What a sandboxed command needs of the CLI itself: the binary, which bubblewrap runs
    again inside the sandbox to set it up (0.171.0 does not grant it under a profile that
    restricts reads), and the ``rg`` Codex puts on the commands' PATH, beside it in npm's
    platform package."""
    native = Path(binary).resolve()
    tools = native.parent.parent / "codex-path"
    return [native, *([tools.resolve()] if tools.is_dir() else [])]


def permission_profile(permissions: str, home: Path, binary: str) -> list[str]:
    """The ``[permissions]`` table of a confined thread: its commands read cwd, the system
    directories a shell needs (Codex's ``:minimal``) and the CLI's ``runtime``, nothing
    else; write cwd only when the sandbox is ``workspace-write``; and never read
    ``unreadable``. Codex keeps a workspace root's ``.git`` and ``.codex`` read-only.
    Nothing for ``danger-full-access``."""
    access = CWD_ACCESS.get(sandbox_mode(permissions))
    if access is None:
        return []
    return [
        "",
        f"[permissions.{PROFILE}.filesystem]",
        '":minimal" = "read"',
        f'":workspace_roots" = {{ "." = {_toml(access)} }}',
        *(f'{_toml(str(path))} = "read"' for path in runtime(binary)),
        *(f'{_toml(str(path))} = "none"' for path in unreadable(home)),
    ]


def config_toml(
    spec: ThreadSpec, env: EngineEnv, *, binary: str, catalog: Path | None, mcp_server: bool
) -> str:
    """The thread's ``config.toml``: the daemon's OpenAI endpoint as the provider, the model,
    approvals off (an ``ask`` thread's policy is set per Codex thread), the permission profile
    (``permission_profile``), no plugin sync or analytics, the catalog
    that keeps Codex's compaction out of reach, and Condensate's MCP server with the thread's
    tools (``context_tools.offered``)."""
    lines = [
        f"model = {_toml(model_slug(spec))}",
        f"model_provider = {_toml(PROVIDER)}",
        # The file takes no "untrusted" (0.171.0 refuses it there); each thread/start sets
        # the thread's own policy.
        'approval_policy = "never"',
        f"default_permissions = {_toml(profile_name(spec.permissions))}",
        "check_for_update_on_startup = false",
    ]
    if catalog is not None:
        lines.append(f"model_catalog_json = {_toml(str(catalog))}")
    lines += [
        "",
        f"[model_providers.{PROVIDER}]",
        'name = "Condensate"',
        f"base_url = {_toml(base_url(env))}",
        f"env_key = {_toml(KEY_VARIABLE)}",
        'wire_api = "responses"',
        *permission_profile(spec.permissions, env.home, binary),
        "",
        # The commands Codex runs do not see the provider's key.
        "[shell_environment_policy]",
        f"exclude = {_toml([KEY_VARIABLE])}",
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[features]",
        "plugins = false",
    ]
    if mcp_server:
        tools = offered(head=spec.head, reset=spec.reset is not None)
        server = mcp.config(sys.executable, env.daemon_url, env.thread_token, env.thread_id, tools)
        entry = server["mcpServers"][mcp.SERVER_NAME]
        lines += [
            "",
            f"[mcp_servers.{mcp.SERVER_NAME}]",
            f"command = {_toml(entry['command'])}",
            f"args = {_toml(entry['args'])}",
            f"env = {{ {', '.join(f'{k} = {_toml(v)}' for k, v in entry['env'].items())} }}",
        ]
    return "\n".join(lines) + "\n"


def bundled_catalog(binary: str, codex_home: Path) -> dict[str, Any]:
    """The model catalog shipped with the binary (``codex debug models --bundled``)."""
    try:
        done = subprocess.run(  # noqa: S603 - the operator's configured binary
            [binary, "debug", "models", "--bundled"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env=_child.child_environment({"CODEX_HOME": str(codex_home)}),
        )
        catalog: dict[str, Any] = json.loads(done.stdout)
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        msg = f"Could not read Codex's model catalog with {binary} debug models: {exc}"
        raise ConfigError(msg) from exc
    if not catalog.get("models"):
        msg = f"{binary} debug models --bundled listed no models"
        raise ConfigError(msg)
    return catalog


def out_of_reach_catalog(bundled: dict[str, Any], slug: str) -> dict[str, Any]:
    """A one-entry catalog for ``slug`` (its bundled entry, or a copy of gpt-5.5's) whose
    window is so large that Codex never compacts on its own."""
    models: list[dict[str, Any]] = bundled["models"]
    by_slug = {m.get("slug"): m for m in models}
    entry = copy.deepcopy(by_slug.get(slug) or by_slug.get(TEMPLATE_SLUG) or models[0])
    entry.update(slug=slug, context_window=OUT_OF_REACH, max_context_window=OUT_OF_REACH)
    return {"models": [entry]}


def prepare_home(binary: str, spec: ThreadSpec, env: EngineEnv, codex_home: Path) -> None:
    """Write the thread's ``CODEX_HOME``: config (0600: a head's holds the API token) and, with
    Condensate windowing, the catalog. Rewritten at every start, so a changed setting
    (``CONDENSATE_CODEX_WINDOWING``) takes effect when the session restarts."""
    codex_home.mkdir(parents=True, exist_ok=True, mode=0o700)
    catalog: Path | None = None
    if settings_of(env).codex_windowing:
        catalog = codex_home / "condensate-models.json"
        if not catalog.exists():
            entries = out_of_reach_catalog(bundled_catalog(binary, codex_home), model_slug(spec))
            _child.write_private(catalog, json.dumps(entries))
    mcp_server = bool(env.daemon_url)
    text = config_toml(spec, env, binary=binary, catalog=catalog, mcp_server=mcp_server)
    _child.write_private(codex_home / "config.toml", text)


def environment(codex_home: Path, env: EngineEnv) -> dict[str, str]:
    """The app-server's environment: its own home and, under the name its config reads, a
    gateway pass for this process (the one before is retired) or, with no gateway, the
    OpenAI key; no other provider's key, no Condensate setting."""
    key = env.gateway.issue() if env.gateway is not None else env.openai_api_key
    return _child.child_environment({"CODEX_HOME": str(codex_home), KEY_VARIABLE: key or "none"})


def command(binary: str) -> list[str]:
    return [binary, "app-server"]


ATTACHED_CATALOG = "attached-models.json"
LOGINS = ("CODEX_HOME", "~/.codex/auth.json")
"""What shows a person has a Codex login of their own: the login ``codex login`` keeps (an
API key or a ChatGPT sign-in), in their own ``CODEX_HOME`` or the default one. Codex 0.171
sends no key from ``OPENAI_API_KEY`` for a provider that uses its login."""
ATTACHED_KEY = "CONDENSATE_GATEWAY_PASS"
"""Where Codex reads the session's pass from, for a person with no login of their own."""
DEFAULT_MODEL = "gpt-6.2-sol"
"""The model the pinned CLI (0.171.0) asks for when neither its arguments nor its config name
one (seen through the gateway). A model the person's own ``config.toml`` names is not read:
the thread then names the default, and its calls' usage the model they were billed on."""


def cli_model(args: Sequence[str]) -> str:
    """The model ``codex`` runs with these arguments: ``-m X`` / ``--model X``, else its
    default."""
    named = DEFAULT_MODEL
    for i, arg in enumerate(args):
        if arg in ("-m", "--model") and i + 1 < len(args):
            named = args[i + 1]
        elif arg.startswith("--model="):
            named = arg.split("=", 1)[1]
    return named if ":" in named else f"openai:{named}"


def launch(settings: EngineSettings, base_url: str, managed: bool, home: Path) -> Launch:
    """A person's own ``codex`` through the gateway: ``-c`` overrides (before their own
    arguments) make a provider of the gateway, its pass in the base URL, with the person's
    own login (``requires_openai_auth``); while Condensate manages the session, every bundled
    model's window is out of reach of Codex's own compaction (it has no off switch)."""
    own = own_settings(CodexSettings, settings)
    binary = resolve_binary(own.codex_binary)
    provider = f"model_providers.{PROVIDER}"
    args = [
        "-c", f"model_provider={_toml(PROVIDER)}",
        "-c", f'{provider}.name="Condensate"',
        "-c", f"{provider}.base_url={_toml(base_url)}",
        "-c", f'{provider}.wire_api="responses"',
        "-c", f"{provider}.requires_openai_auth=true",
    ]  # fmt: skip
    if managed:
        catalog = home / STATE_DIR / ATTACHED_CATALOG
        if not catalog.exists():
            catalog.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            listed = bundled_catalog(binary, catalog.parent)
            _child.write_private(catalog, json.dumps(every_model_out_of_reach(listed)))
        args += ["-c", f"model_catalog_json={_toml(str(catalog))}"]
    keyless = (
        "-c", f"{provider}.requires_openai_auth=false",
        "-c", f"{provider}.env_key={_toml(ATTACHED_KEY)}",
    )  # fmt: skip
    return Launch(binary, tuple(args), {}, LOGINS, ATTACHED_KEY, keyless)


def every_model_out_of_reach(bundled: dict[str, Any]) -> dict[str, Any]:
    """The bundled catalog with every model's window out of Codex's compaction's reach: a
    person may switch models (``/model``) in the session."""
    models = copy.deepcopy(bundled["models"])
    for entry in models:
        entry.update(context_window=OUT_OF_REACH, max_context_window=OUT_OF_REACH)
    return {**bundled, "models": models}
