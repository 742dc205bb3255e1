"""The Codex engine's set-up: which CLI it runs, which versions it accepts, and the
``CODEX_HOME`` it generates for a thread. No app-server is started (the version check runs a
script standing in for ``codex --version``)."""

from __future__ import annotations

import stat
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest

from adapters.codex import _cli
from condensate.engine import EngineEnv, ThreadSpec
from condensate.errors import ConfigError, Refused

TOKEN = "token-for-tests"  # noqa: S105 - a test value
CODEX = "/opt/codex/vendor/x86_64-unknown-linux-musl/bin/codex"
SPEC = ThreadSpec(engine="codex", model="openai:gpt-5.5", cwd="/work", brief="b")
BUNDLED = {
    "models": [
        {"slug": "gpt-6-sol", "context_window": 272_000, "max_context_window": 872_000},
        {"slug": "gpt-5.5", "context_window": 272_000, "max_context_window": 272_000, "x": 1},
    ]
}


def env(tmp_path: Path, *, codex_windowing: bool = True) -> EngineEnv:
    return EngineEnv(
        home=tmp_path,
        thread_id="t-1",
        openai_base_url="http://127.0.0.1:9/v1",
        openai_api_key="sk-test",
        daemon_url="http://127.0.0.1:4741",
        thread_token=TOKEN,
        settings=_cli.CodexSettings(codex_windowing=codex_windowing),
    )


def fake_cli(tmp_path: Path, version: str) -> str:
    path = tmp_path / f"codex-{version}"
    path.write_text(f"#!/bin/sh\necho 'codex-cli {version}'\n")
    path.chmod(0o755)
    return str(path)


def test_a_missing_binary_names_what_to_install(tmp_path):
    """A configured CLI that does not exist is refused with the install commands."""
    with pytest.raises(ConfigError) as error:
        _cli.resolve_binary(str(tmp_path / "no-such-codex"))
    assert "npm ci" in str(error.value)
    assert f"@openai/codex@{_cli.PINNED_VERSION}" in str(error.value)
    assert "CONDENSATE_CODEX_BINARY" in str(error.value)


def test_an_older_codex_is_refused_naming_both_versions(tmp_path):
    """A CLI of another major.minor than the pinned one is refused."""
    with pytest.raises(ConfigError) as error:
        _cli.check_version(fake_cli(tmp_path, "0.98.0"))
    assert "0.98.0" in str(error.value)
    assert _cli.PINNED_VERSION in str(error.value)


def test_a_patch_release_of_the_pinned_minor_is_accepted(tmp_path):
    assert _cli.check_version(fake_cli(tmp_path, "0.171.9")) == "0.171.9"


def test_the_npm_wrapper_is_replaced_by_its_native_binary(tmp_path):
    """npm's ``bin/codex.js`` is resolved to the platform package's native binary, which
    then gets our signals directly."""
    package = tmp_path / "node_modules" / "@openai" / "codex"
    (package / "bin").mkdir(parents=True)
    (package / "bin" / "codex.js").write_text("// wrapper")
    native = tmp_path / "node_modules" / "@openai" / "codex-linux-x64" / "vendor" / "x86" / "bin"
    native.mkdir(parents=True)
    (native / "codex").write_text("")
    assert _cli.native_binary(package / "bin" / "codex.js") == native / "codex"
    assert _cli.native_binary(native / "codex") is None


def test_a_global_installs_nested_native_binary_is_found(tmp_path):
    """``npm install -g`` nests the platform package inside ``@openai/codex``'s own
    node_modules; the wrapper there resolves to that native binary too."""
    package = tmp_path / "lib" / "node_modules" / "@openai" / "codex"
    (package / "bin").mkdir(parents=True)
    (package / "bin" / "codex.js").write_text("// wrapper")
    platform = package / "node_modules" / "@openai" / "codex-linux-x64"
    native = platform / "vendor" / "x86_64-unknown-linux-musl" / "bin"
    native.mkdir(parents=True)
    (native / "codex").write_text("")
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "codex").symlink_to(package / "bin" / "codex.js")
    assert _cli.native_binary(tmp_path / "bin" / "codex") == native / "codex"


@pytest.mark.parametrize(
    ("permissions", "sandbox"),
    [
        ("default", "danger-full-access"),
        ("workspace", "workspace-write"),
        ("read-only", "read-only"),
        ("workspace-write", "workspace-write"),
        ("danger-full-access", "danger-full-access"),
    ],
)
def test_permissions_become_a_codex_sandbox(permissions, sandbox):
    """Default runs unattended, the documented values get their sandbox, and Codex's own
    sandbox names pass through."""
    assert _cli.sandbox_mode(permissions) == sandbox


def test_unknown_permissions_are_refused_as_unsupported():
    """Permissions with no Codex sandbox are refused (422), listing the ones it enforces."""
    with pytest.raises(Refused) as refused:
        _cli.check(replace(SPEC, permissions="bypassPermissions"))
    assert refused.value.code == "unsupported-permissions"
    assert "workspace-write" in str(refused.value)


def test_a_tools_list_is_refused_since_codex_cannot_limit_its_tools():
    """Codex keeps its own tool set: a thread with tools is refused (422) with a sentence
    saying so."""
    with pytest.raises(Refused) as refused:
        _cli.check(replace(SPEC, tools=("exec_command",)))
    assert refused.value.code == "unsupported-tools"
    assert "cannot limit" in str(refused.value)


def test_a_non_openai_model_is_refused():
    """Codex speaks the Responses API only: an anthropic: model is refused with an example."""
    spec = ThreadSpec(engine="codex", model="anthropic:claude-sonnet-4-5", cwd="/w", brief="b")
    with pytest.raises(ConfigError, match=r"openai:gpt-5\.5"):
        _cli.model_slug(spec)


def test_the_config_points_codex_at_the_daemons_provider(tmp_path):
    """The generated config names the model, the provider (key by variable, not in the file),
    no approvals, Codex's unconfined profile for a default thread, and turns plugin sync and
    analytics off."""
    catalog = tmp_path / "models.json"
    text = _cli.config_toml(SPEC, env(tmp_path), binary=CODEX, catalog=catalog, mcp_server=False)
    config = tomllib.loads(text)
    assert config["model"] == "gpt-5.5"
    provider = config["model_providers"][config["model_provider"]]
    assert provider["base_url"] == "http://127.0.0.1:9/v1"
    assert provider["wire_api"] == "responses"
    assert provider["env_key"] == _cli.KEY_VARIABLE
    assert config["approval_policy"] == "never"
    assert config["default_permissions"] == ":danger-full-access"
    assert "permissions" not in config
    assert config["analytics"]["enabled"] is False
    assert config["features"]["plugins"] is False
    assert config["model_catalog_json"] == str(catalog)
    assert "mcp_servers" not in config
    assert "sk-test" not in text


@pytest.mark.parametrize(("permissions", "cwd"), [("read-only", "read"), ("workspace", "write")])
def test_a_confined_threads_profile_reads_cwd_and_never_condensates_files(
    tmp_path, monkeypatch, permissions, cwd
):
    """A confined thread's profile lets its commands read the system's directories, cwd
    (write it too under workspace) and the CLI, and never the state directory or the
    configuration file, by their paths and by where a symlink leads."""
    target = tmp_path / "elsewhere.env"
    (tmp_path / "env").symlink_to(target)
    monkeypatch.setenv("CONDENSATE_CONFIG", str(tmp_path / "env"))
    spec = replace(SPEC, permissions=permissions)
    text = _cli.config_toml(spec, env(tmp_path), binary=CODEX, catalog=None, mcp_server=False)
    config = tomllib.loads(text)
    assert config["default_permissions"] == _cli.PROFILE
    assert "sandbox_mode" not in config
    assert config["permissions"][_cli.PROFILE]["filesystem"] == {
        ":minimal": "read",
        ":workspace_roots": {".": cwd},
        CODEX: "read",
        str(tmp_path): "none",
        str(tmp_path / "env"): "none",
        str(target): "none",
    }


def test_a_heads_config_starts_condensates_mcp_server(tmp_path):
    """A head's config runs ``condensate.engine.mcp`` for its thread, the API token in its env."""
    text = _cli.config_toml(SPEC, env(tmp_path), binary=CODEX, catalog=None, mcp_server=True)
    server = tomllib.loads(text)["mcp_servers"]["condensate"]
    assert server["args"][:2] == ["-m", "condensate.engine.mcp"]
    assert "t-1" in server["args"]
    assert server["env"]["CONDENSATE_MCP_TOKEN"] == TOKEN


def test_the_catalog_puts_codexs_compaction_out_of_reach():
    """The catalog entry is the model's bundled one with a window no prompt reaches; an
    unknown model gets a copy of gpt-5.5's."""
    (entry,) = _cli.out_of_reach_catalog(BUNDLED, "gpt-5.5")["models"]
    assert entry["context_window"] == entry["max_context_window"] == _cli.OUT_OF_REACH
    assert entry["x"] == 1
    (other,) = _cli.out_of_reach_catalog(BUNDLED, "my-finetune")["models"]
    assert other["slug"] == "my-finetune"
    assert other["x"] == 1
    assert BUNDLED["models"][1]["context_window"] == 272_000  # the bundled one is untouched


def test_with_windowing_off_no_catalog_is_written(tmp_path):
    """CONDENSATE_CODEX_WINDOWING=0: the config leaves Codex's own windows (and compaction)
    alone, and is readable by its owner only."""
    home = tmp_path / "codex"
    _cli.prepare_home("codex-not-run", SPEC, env(tmp_path, codex_windowing=False), home)
    config = tomllib.loads((home / "config.toml").read_text())
    assert "model_catalog_json" not in config
    assert not (home / "condensate-models.json").exists()
    assert stat.S_IMODE((home / "config.toml").stat().st_mode) == 0o600


def test_ask_runs_in_the_workspace_sandbox_with_codex_asking_before_commands():
    """ask: the workspace-write sandbox, and each Codex thread asks (untrusted) before any
    command it does not know to be read-only; every other value never asks."""
    assert _cli.sandbox_mode("ask") == "workspace-write"
    assert _cli.approval_policy("ask") == "untrusted"
    assert {_cli.approval_policy(p) for p in ("default", "workspace", "read-only")} == {"never"}
