"""One source of settings, as real subprocesses: the daemon and the command line read the
environment, then the configuration file; ``condensate config`` shows each setting and where
it came from and edits the file; a bad value is one sentence; a misspelt variable and a
provider without a credential are warned about."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest

from condensate.testing.fake_model import FakeModelServer, Text
from tests.integration.daemon import REPO, DaemonProcess, call, wait_for

MODEL = "anthropic:claude-sonnet-4-5"


def run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``condensate ARGS`` with a configuration directory of its own under ``tmp_path``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CONDENSATE_")}
    clean |= {"XDG_CONFIG_HOME": str(tmp_path / "config"), "CONDENSATE_HOME": str(tmp_path)}
    return subprocess.run(
        [sys.executable, "-m", "condensate", *args],
        cwd=REPO,
        env=clean | env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def config_file(tmp_path: Path) -> Path:
    return tmp_path / "config" / "condensate" / "env"


def test_config_says_where_each_setting_came_from(tmp_path: Path):
    """The environment, the file with its line, or the default; a key is never shown whole."""
    path = config_file(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text("# mine\nCONDENSATE_WINDOW_TARGET=0.4\nANTHROPIC_API_KEY=sk-ant-secret-9876\n")
    done = run(tmp_path, "config", "--json", CONDENSATE_OUTPUT_RESERVE="4096")
    assert done.returncode == 0, done.stderr
    rows = {r["name"]: r for r in json.loads(done.stdout)["settings"]}
    assert rows["CONDENSATE_WINDOW_TARGET"] == {
        "name": "CONDENSATE_WINDOW_TARGET",
        "value": "0.4",
        "source": f"{path}:2",
    }
    assert rows["CONDENSATE_OUTPUT_RESERVE"]["source"] == "environment"
    assert rows["CONDENSATE_PORT"] == {
        "name": "CONDENSATE_PORT",
        "value": "4741",
        "source": "default",
    }
    assert rows["CONDENSATE_ANTHROPIC_API_KEY"]["value"] == "…9876"
    assert "secret" not in done.stdout
    assert "CONDENSATE_CLAUDE_BINARY" in rows  # an engine's settings too


def test_the_old_name_of_the_prices_setting_shows_as_the_new_one(tmp_path: Path):
    """``CONDENSATE_MODEL_PRICES`` (the old name) is read as ``CONDENSATE_PRICES``, shown
    under the new name, and not warned about as a misspelling."""
    given = '{"gpt-7": {"input": 1, "output": 2}}'
    done = run(tmp_path, "config", "--json", CONDENSATE_MODEL_PRICES=given)
    assert done.returncode == 0, done.stderr
    rows = {r["name"]: r for r in json.loads(done.stdout)["settings"]}
    assert rows["CONDENSATE_PRICES"]["source"] == "environment"
    assert "CONDENSATE_MODEL_PRICES" not in rows
    assert "not a Condensate setting" not in done.stderr


def test_config_set_writes_the_file_the_daemon_reads(tmp_path: Path):
    """``config set`` writes a private file; a value a setting cannot take is refused in one
    sentence and the file is left as it was."""
    assert run(tmp_path, "config", "set", "CONDENSATE_PORT", "4800").returncode == 0
    path = config_file(tmp_path)
    assert path.read_text() == "CONDENSATE_PORT=4800\n"
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    refused = run(tmp_path, "config", "set", "CONDENSATE_PORT", "not-a-port")
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1
    assert "CONDENSATE_PORT" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert path.read_text() == "CONDENSATE_PORT=4800\n"


def test_config_set_of_a_misspelt_name_names_the_setting_meant(tmp_path: Path):
    done = run(tmp_path, "config", "set", "CONDENSATE_WINDOW_TARGT", "0.5")
    assert done.returncode == 2
    assert "did you mean CONDENSATE_WINDOW_TARGET?" in done.stderr
    assert not config_file(tmp_path).exists()


def test_a_misspelt_variable_is_warned_about_by_every_command(tmp_path: Path):
    """In the environment or in the file, with the setting it is closest to."""
    path = config_file(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text("CONDENSATE_WINDOW_EARLYY=0\n")
    done = run(tmp_path, "doctor", CONDENSATE_PROT="4800")
    assert done.returncode == 0, done.stderr
    assert "CONDENSATE_PROT is not a Condensate setting; did you mean CONDENSATE_PORT?" in (
        done.stderr
    )
    assert "did you mean CONDENSATE_WINDOW_EARLY?" in done.stderr


def test_a_bad_value_in_the_file_is_one_sentence_naming_its_line(tmp_path: Path):
    path = config_file(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text("\nCONDENSATE_WINDOW_TARGET=lots\n")
    done = run(tmp_path, "threads")
    assert done.returncode == 78
    assert done.stderr == (
        f"condensate: Invalid settings: CONDENSATE_WINDOW_TARGET (set in {path}:2): Input should "
        "be a valid number, unable to parse string as a number.\n"
    )


@pytest.mark.parametrize("command", ["threads", "serve"])
def test_a_json_setting_that_is_not_json_is_one_sentence_and_exit_78(tmp_path: Path, command: str):
    """A JSON-valued setting that does not parse stops any command, the daemon included, with
    one sentence naming the variable and where it was set, and EX_CONFIG (78: the systemd
    unit does not restart it); no traceback."""
    done = run(tmp_path, command, CONDENSATE_MODEL_WINDOWS="not json")
    assert done.returncode == 78
    assert done.stderr == (
        "condensate: Invalid settings: CONDENSATE_MODEL_WINDOWS (set in the environment): "
        "not valid JSON.\n"
    )


@pytest.fixture
async def keyed_fake():
    """A fake provider that answers only the key ``sk-from-the-file``."""
    async with FakeModelServer(api_key="sk-from-the-file") as fake:
        yield fake


async def test_the_daemon_reads_the_key_from_the_file(tmp_path: Path, keyed_fake, session):
    """A key set with ``config set`` (not in the daemon's environment) reaches the provider."""
    home = tmp_path / "home"
    home.mkdir()
    daemon = DaemonProcess(
        home,
        keyed_fake.url,
        extra_env={"XDG_CONFIG_HOME": str(tmp_path)},
        without=("CONDENSATE_ANTHROPIC_API_KEY",),
    )
    path = tmp_path / "condensate" / "env"
    path.parent.mkdir(parents=True)
    path.write_text("CONDENSATE_ANTHROPIC_API_KEY=sk-from-the-file\n")
    keyed_fake.queue(Text("Keyed."))
    daemon.start()
    try:
        body = {"model": MODEL, "cwd": str(tmp_path), "brief": "hello"}
        status, created = await call(session, daemon, "POST", "/threads", body)
        assert status == 201, created
        events = await wait_for(session, daemon, created["id"], lambda e: e["kind"] == "turn.ended")
        assert events[-1]["outcome"] == "completed", events[-1]
        assert keyed_fake.requests[-1].status == 200
    finally:
        daemon.close()


async def test_the_daemon_warns_at_start_naming_the_missing_credential(tmp_path: Path, fake):
    """No OpenAI key anywhere: the daemon says which variable the codex engine needs."""
    (tmp_path / "home").mkdir()
    daemon = DaemonProcess(tmp_path / "home", fake.url, without=("CONDENSATE_OPENAI_API_KEY",))
    daemon.start()
    try:
        warned = [
            json.loads(line)
            for line in daemon.log_tail().splitlines()
            if '"setting_warning"' in line
        ]
    finally:
        daemon.close()
    (warning,) = warned
    assert "The codex engine's provider (openai) has no credential" in warning["detail"]
    assert "CONDENSATE_OPENAI_API_KEY" in warning["detail"]


async def test_a_thread_on_a_provider_without_a_credential_is_refused(
    tmp_path: Path, fake: FakeModelServer, session: aiohttp.ClientSession
) -> None:
    """No OpenAI key anywhere: a thread on an openai: model is refused 422 no-credential,
    naming the variable to set, instead of failing with 401 later."""
    (tmp_path / "home").mkdir()
    daemon = DaemonProcess(tmp_path / "home", fake.url, without=("CONDENSATE_OPENAI_API_KEY",))
    daemon.start()
    try:
        body = {"model": "openai:gpt-5.5", "cwd": str(tmp_path), "brief": "hello"}
        status, refused = await call(session, daemon, "POST", "/threads", body)
    finally:
        daemon.close()
    assert (status, refused["error"]) == (422, "no-credential")
    assert "CONDENSATE_OPENAI_API_KEY" in refused["detail"]
    assert fake.requests == []


def test_config_set_says_when_the_environment_wins(tmp_path: Path):
    """Setting in the file a variable the environment also sets writes it and says that the
    environment's value is the one in effect."""
    done = run(tmp_path, "config", "set", "CONDENSATE_PORT", "4900", CONDENSATE_PORT="4800")
    assert done.returncode == 0, done.stderr
    assert "the environment sets CONDENSATE_PORT too, and it wins" in done.stdout
    assert "CONDENSATE_PORT=4900" in config_file(tmp_path).read_text()


def test_config_set_checks_the_files_value_even_when_the_environment_wins(tmp_path: Path):
    """A broken JSON value is refused and the file left as it was, though the environment's
    valid value would have hidden it."""
    done = run(
        tmp_path,
        "config",
        "set",
        "CONDENSATE_MODEL_WINDOWS",
        "not json",
        CONDENSATE_MODEL_WINDOWS="{}",
    )
    assert done.returncode == 2
    assert "CONDENSATE_MODEL_WINDOWS" in done.stderr
    assert "not valid JSON" in done.stderr
    assert not config_file(tmp_path).exists()


def test_the_file_is_read_as_systemd_reads_it(tmp_path: Path):
    """An inline '#' is part of the value, as systemd's EnvironmentFile reads it (the daemon
    under systemd sees that value): every command reads the same, and names the line."""
    path = config_file(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text("CONDENSATE_LOG_FORMAT=json # the daemon's\n")
    done = run(tmp_path, "threads")
    assert done.returncode == 78
    assert f"CONDENSATE_LOG_FORMAT (set in {path}:1)" in done.stderr
    shown = json.loads(run(tmp_path, "config", "--json").stdout)
    assert any("CONDENSATE_LOG_FORMAT (set in" in warning for warning in shown["warnings"])
