"""Whether a shell command only reads: its output can be had again by running it again, so a
cheap tier may clear it like a file read. Codex runs every read as a shell command, and Claude
Code's agents often read with Bash. Pure: no I/O.

A command reads only when every command of it (the parts of a pipeline, and of a list joined
by ``&&``, ``||`` or ``;``) is a reader (``cat``, ``sed -n``, ``head``, ``grep``, ``rg``,
``ls``, ``find`` without ``-exec`` or ``-delete``, ``git show|diff|log|status``...), it writes
no file (a redirection is allowed only to ``/dev/null`` or another descriptor, as in
``2>&1``), and it runs nothing it does not show (no command substitution, no process
substitution, no subshell, no backgrounding). ``bash -c``/``sh -c`` and ``bash -lc`` are read
through; ``cd`` and variable assignments are harmless. Anything that cannot be parsed is not a
read: an action is only cleared by collapse.
"""

from __future__ import annotations

import re
import shlex

READERS = frozenset(
    {
        "cat",
        "head",
        "tail",
        "nl",
        "wc",
        "less",
        "more",
        "grep",
        "egrep",
        "fgrep",
        "rg",
        "ag",
        "ls",
        "tree",
        "stat",
        "file",
        "du",
        "pwd",
        "echo",
        "printf",
        "sort",
        "uniq",
        "cut",
        "tr",
        "column",
        "jq",
        "yq",
        "diff",
        "cmp",
        "comm",
        "md5sum",
        "sha1sum",
        "sha256sum",
        "basename",
        "dirname",
        "realpath",
        "readlink",
        "which",
        "type",
        "od",
        "hexdump",
        "xxd",
        "strings",
        "true",
    }
)
"""Commands that only read whatever their arguments (without a redirection of theirs)."""
GIT_READERS = frozenset(
    {"show", "diff", "log", "status", "blame", "ls-files", "grep", "rev-parse", "cat-file"}
)
HARMLESS = frozenset({"cd", "pushd", "popd"})
"""Commands that change nothing a rerun could not repeat."""
FIND_ACTIONS = frozenset(
    {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"}
)
SHELLS = frozenset({"bash", "sh", "zsh", "dash"})
LIST_OPERATORS = frozenset({"|", "||", "&&", ";", "|&"})
_UNSAFE = re.compile(r"\$\(|`|<\(|>\(|\n")
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
REDIRECTS = frozenset({">", ">>", ">|", "&>", "&>>", ">&", "<", "<<", "<<<", "<&", "<>"})
"""Redirection operators, as the lexer splits them from their descriptor and target."""


_PLAIN = re.compile(r"[^\s'\"\\#;&|<>()]+(?:[ \t]+[^\s'\"\\#;&|<>()]+)*")
"""Words with nothing the lexer treats apart (no quote, escape, comment or operator) between
spaces and tabs: the lexer would split them there and nowhere else."""


def reads_only(command: str) -> bool:
    """Whether ``command`` (as the model wrote it) only reads."""
    command = command.strip()
    if not command or command.endswith("…") or _UNSAFE.search(command):
        return False  # cut short in the log, or running what it does not show
    tokens = words(command)
    if tokens is None:
        return False
    if any(t in ("(", ")", "&") for t in tokens):
        return False  # a subshell, or a job in the background
    return all(_reads(part) for part in _commands(tokens))


def words(command: str) -> list[str] | None:
    """The lexer's words and operators of ``command``; None when it cannot be parsed. The
    projector asks this of every shell result it folds, and most commands are plain words
    (``pytest -q``, ``git status``): those are split at their spaces without the lexer,
    which costs ten times as much."""
    if _PLAIN.fullmatch(command):
        return command.split()
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|<>()")
        lexer.whitespace_split = True
        return list(lexer)
    except ValueError:
        return None


def _commands(tokens: list[str]) -> list[list[str]]:
    """The simple commands of a list or pipeline, each with its redirections."""
    parts: list[list[str]] = [[]]
    for token in tokens:
        if token in LIST_OPERATORS:
            parts.append([])
        else:
            parts[-1].append(token)
    return parts


def _reads(words: list[str]) -> bool:
    """One simple command: its redirections write nothing, and the command reads."""
    plain: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word in REDIRECTS:
            target = words[i + 1] if i + 1 < len(words) else ""
            if plain and plain[-1].isdigit():
                plain.pop()  # the descriptor the redirection names (``2>&1``)
            if not _harmless(word, target):
                return False
            i += 2
            continue
        plain.append(word)
        i += 1
    while plain and _ASSIGNMENT.match(plain[0]):
        plain = plain[1:]
    if not plain:
        return True
    return _reader(plain)


def _harmless(operator: str, target: str) -> bool:
    """A redirection that writes no file: input, a copy of a descriptor (``2>&1``), or
    output to ``/dev/null``."""
    if operator in ("<", "<<", "<<<"):
        return True
    if operator in (">&", "<&"):
        return target.isdigit() or target in {"-", "/dev/null"}
    return target == "/dev/null" and operator != "<>"


def _reader(words: list[str]) -> bool:
    name = words[0].rsplit("/", 1)[-1]
    args = words[1:]
    if name in SHELLS:
        flags = [a for a in args if a.startswith("-")]
        scripts = [a for a in args if not a.startswith("-")]
        if any("c" in f for f in flags) and len(scripts) == 1:
            return reads_only(scripts[0])
        return False
    if name in HARMLESS or name in READERS:
        return True
    if name == "sed":
        return not any(
            a.startswith("--in-place") or (a[:1] == "-" and a[1:2] != "-" and "i" in a[1:])
            for a in args
        )
    if name == "find":
        return not any(a in FIND_ACTIONS for a in args)
    if name == "xargs":
        rest = [a for a in args if not a.startswith("-")]
        return bool(rest) and _reader(rest)
    if name == "awk":
        program = next((a for a in args if not a.startswith("-")), "")
        return ">" not in program and "system" not in program and "|" not in program
    if name == "git":
        sub = next((a for a in args if not a.startswith("-")), "")
        return sub in GIT_READERS or (sub == "branch" and all(a.startswith("-") for a in args[1:]))
    return False
