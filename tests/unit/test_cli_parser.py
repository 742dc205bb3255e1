"""The command line's own words: its help is plain text a person reads (no docstring markup,
no internal function names), `--json` may come before the command or after it, and `--db`
is offered only by the commands that read a log in place."""

from __future__ import annotations

import pytest

from condensate.cli import READS_A_LOG, build_parser


def test_the_help_is_plain_text() -> None:
    """No reStructuredText double backquotes and no internal names in `condensate --help`."""
    text = build_parser().format_help()
    assert "``" not in text
    assert "cmd_" not in text
    assert "serve" in text


@pytest.mark.parametrize("argv", [["--json", "threads"], ["threads", "--json"]])
def test_json_may_come_before_or_after_the_command(argv: list[str]) -> None:
    assert build_parser().parse_args(argv).json is True


def test_without_json_the_answer_is_text() -> None:
    assert build_parser().parse_args(["threads"]).json is False


def test_only_the_commands_that_read_a_log_take_db(capsys: pytest.CaptureFixture[str]) -> None:
    """`view --db F` is taken; `threads --db F` is refused naming the argument."""
    assert build_parser().parse_args(["view", "t-1", "--db", "log.db"]).db == "log.db"
    assert {"doctor", "view", "export", "archive"} == READS_A_LOG
    with pytest.raises(SystemExit):
        build_parser().parse_args(["threads", "--db", "log.db"])
    assert "unrecognized arguments: --db" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["run", "do it", "--model", "m"], ["chat", "--model", "m"]])
def test_a_new_threads_permissions_can_be_given(command: list[str]) -> None:
    """`run` and `chat` start threads, and take their permissions (default: default)."""
    parser = build_parser()
    assert parser.parse_args(command).permissions == "default"
    assert parser.parse_args([*command, "--permissions", "read-only"]).permissions == "read-only"
