"""Shell completion, written from the parser itself so that it never drifts from the commands:
``condensate completion bash|zsh|fish`` prints a script that completes the subcommands, each
one's options, and a thread's id where a command takes one (asked of the daemon with
``condensate threads -q``)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

SHELLS = ("bash", "zsh", "fish")


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    options: tuple[str, ...]
    takes_thread: bool
    choices: tuple[str, ...]
    """Words its first positional argument takes (``config``'s actions), if any."""


def commands(parser: argparse.ArgumentParser) -> list[Command]:
    """Every subcommand of ``parser``: its options, and whether its first argument is a
    thread."""
    found: list[Command] = []
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {a.dest: a.help or "" for a in action._choices_actions}
        for name, sub in action.choices.items():
            options = tuple(o for a in sub._actions for o in a.option_strings)
            positional = [a for a in sub._actions if not a.option_strings]
            first = positional[0] if positional else None
            found.append(
                Command(
                    name,
                    helps.get(name, ""),
                    options,
                    first is not None and first.dest == "thread",
                    tuple(first.choices or ()) if first is not None else (),
                )
            )
    return found


def script(shell: str, parser: argparse.ArgumentParser) -> str:
    """The completion script for ``shell``."""
    found = commands(parser)
    if shell == "fish":
        return _fish(found)
    bash = _bash(found)
    if shell == "zsh":
        return "autoload -U +X bashcompinit && bashcompinit\n" + bash
    return bash


def _bash(found: list[Command]) -> str:
    cases = []
    for c in found:
        words = " ".join([*c.options, *c.choices])
        cases.append(f'        {c.name}) opts="{words}"; thread={int(c.takes_thread)} ;;')
    names = " ".join(c.name for c in found)
    return (
        "_condensate() {\n"
        '    local cur="${COMP_WORDS[COMP_CWORD]}" opts="" thread=0\n'
        '    if [ "$COMP_CWORD" -eq 1 ]; then\n'
        f'        COMPREPLY=($(compgen -W "{names}" -- "$cur"))\n'
        "        return\n"
        "    fi\n"
        '    case "${COMP_WORDS[1]}" in\n' + "\n".join(cases) + "\n    esac\n"
        '    if [ "$thread" = 1 ] && [ "$COMP_CWORD" -eq 2 ] && [[ "$cur" != -* ]]; then\n'
        '        COMPREPLY=($(compgen -W "$(condensate threads -q 2>/dev/null)" -- "$cur"))\n'
        "        return\n"
        "    fi\n"
        '    COMPREPLY=($(compgen -W "$opts" -- "$cur"))\n'
        "}\n"
        "complete -F _condensate condensate\n"
    )


def _fish(found: list[Command]) -> str:
    lines = ["complete -c condensate -f"]
    for c in found:
        described = c.help.replace("'", "\\'")
        lines.append(
            f"complete -c condensate -n __fish_use_subcommand -a {c.name} -d '{described}'"
        )
        when = f"__fish_seen_subcommand_from {c.name}"
        for option in c.options:
            flag = f"-l {option[2:]}" if option.startswith("--") else f"-s {option[1:]}"
            lines.append(f"complete -c condensate -n '{when}' {flag}")
        if c.choices:
            lines.append(f"complete -c condensate -n '{when}' -a '{' '.join(c.choices)}'")
        if c.takes_thread:
            lines.append(f"complete -c condensate -n '{when}' -a '(condensate threads -q)'")
    return "\n".join(lines) + "\n"
