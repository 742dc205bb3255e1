"""The configuration file (``condensate.config``): systemd's NAME=VALUE syntax, where it is,
where each setting came from, misspelt names, writing a setting, secrets never shown."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from condensate import config
from condensate.errors import ConfigError


def test_the_file_is_condensate_config_else_the_xdg_config_home_one(tmp_path: Path):
    """$CONDENSATE_CONFIG names it; else $XDG_CONFIG_HOME/condensate/env; else ~/.config."""
    named = {"CONDENSATE_CONFIG": str(tmp_path / "c.env"), "XDG_CONFIG_HOME": "/x"}
    assert config.config_path(named) == tmp_path / "c.env"
    assert config.config_path({"XDG_CONFIG_HOME": "/x"}) == Path("/x/condensate/env")
    assert config.config_path({}) == Path.home() / ".config" / "condensate" / "env"


def test_systemd_syntax_is_read_with_comments_blanks_and_quotes():
    text = '# a comment\n; another\n\nCONDENSATE_PORT=4800\nCONDENSATE_PERSONA="two words"\n'
    found = config.parse(text, "env")
    assert {k: (v.value, v.number) for k, v in found.items()} == {
        "CONDENSATE_PORT": ("4800", 4),
        "CONDENSATE_PERSONA": ("two words", 5),
    }


def test_a_line_that_is_no_setting_is_one_sentence_naming_file_and_line():
    with pytest.raises(ConfigError, match=r"^env, line 2: 'export X' is not NAME=VALUE"):
        config.parse("A=1\nexport X\n", "env")


def test_the_environment_wins_over_the_file(tmp_path: Path):
    path = tmp_path / "env"
    path.write_text("CONDENSATE_PORT=1\nCONDENSATE_HOST=10.0.0.1\n")
    merged = config.layered({"CONDENSATE_PORT": "2"}, path)
    assert merged["CONDENSATE_PORT"] == "2"
    assert merged["CONDENSATE_HOST"] == "10.0.0.1"


def test_each_setting_says_where_it_came_from(tmp_path: Path):
    path = tmp_path / "env"
    path.write_text("\nANTHROPIC_API_KEY=sk-file\n")
    names = ("CONDENSATE_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY")
    lines = config.read_file(path)
    assert config.source(names, {}, path, lines) == f"{path}:2"
    assert config.source(names, {"ANTHROPIC_API_KEY": "x"}, path, lines) == "environment"
    assert config.source(("CONDENSATE_PORT",), {}, path, lines) == "default"


def test_a_misspelt_name_is_warned_with_the_closest_setting():
    known = ["CONDENSATE_PORT", "CONDENSATE_HOST"]
    names = ["CONDENSATE_PROT", "CONDENSATE_PORT", "HOME", "CONDENSATE_ZZZ"]
    assert config.unknown(names, known) == [
        "CONDENSATE_PROT is not a Condensate setting; did you mean CONDENSATE_PORT?",
        "CONDENSATE_ZZZ is not a Condensate setting; no setting reads it.",
    ]


def test_writing_keeps_other_lines_and_makes_the_file_private(tmp_path: Path):
    path = tmp_path / "conf" / "env"
    config.write(path, "CONDENSATE_PORT", "4800")
    path.write_text("# mine\n" + path.read_text())
    config.write(path, "CONDENSATE_PERSONA", "two words")
    config.write(path, "CONDENSATE_PORT", "4900")
    assert path.read_text() == '# mine\nCONDENSATE_PORT=4900\nCONDENSATE_PERSONA="two words"\n'
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    config.write(path, "CONDENSATE_PORT", None)
    assert "CONDENSATE_PORT" not in config.read_file(path)


@pytest.mark.parametrize(
    ("name", "value", "printed"),
    [
        ("CONDENSATE_ANTHROPIC_API_KEY", "sk-ant-0123456789abcd", "…abcd"),
        ("CONDENSATE_ANTHROPIC_API_KEY", "", ""),
        ("CONDENSATE_DATABASE_URL", "postgresql://me:pw@db/c", "postgresql://me:…@db/c"),
        ("CONDENSATE_PORT", 4741, "4741"),
        ("CONDENSATE_ANTHROPIC_AUTH_TOKEN", "sk-ant-oat01-abcdefgh", "…efgh"),
        ("CONDENSATE_CLAMP_TOKENS", 500, "500"),
    ],
)
def test_secrets_are_never_printed_whole(name: str, value: object, printed: str):
    assert config.shown(name, value) == printed
