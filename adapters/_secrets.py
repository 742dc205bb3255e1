"""The one rule for which variables of the daemon's environment are secrets, for every
process an engine starts: the native loop's shell commands and the CLIs (and through them the
commands their agents run).

A name is a secret when it is a Condensate setting or a provider's credential, when a word of
it (split on ``_``) is or ends in TOKEN, SECRET, PASSWORD, PASSWD or CREDENTIAL(S), is APIKEY,
AUTH, PASS, PWD, DSN, COOKIE or WEBHOOK, or when its last word is KEY; and a value that is a URL
carrying a password (``postgresql://me:pw@db``) is one, whatever its name. Whole words and
word ends, so TOKENIZERS_PARALLELISM, KEYMAP and the working directory's PWD stay; PATH, HOME,
LANG, LC_*, SSH_AUTH_SOCK (a socket) and the proxies (which a CLI may need) are never touched.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

PROVIDER_KEYS = frozenset(
    {"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY", "CODEX_PROVIDER_API_KEY"}
)
"""The provider credentials the daemon reads; the rule covers them, they are named here so the
rule cannot drift away from them unnoticed."""
WORDS = frozenset(
    {"APIKEY", "AUTH", "PASS", "PWD", "DSN", "COOKIE", "COOKIES", "WEBHOOK", "CREDENTIALS"}
)
"""Words that make a name a secret wherever they stand."""
ENDINGS = ("TOKEN", "SECRET", "SECRETS", "PASSWORD", "PASSWD", "CREDENTIAL")
"""Word ends that do: GITHUB_TOKEN, PGPASSWORD, NPM_AUTHTOKEN."""
KEPT = frozenset({"PWD", "OLDPWD", "SSH_AUTH_SOCK", "XAUTHORITY"})
"""Names the rule would take that are no secret."""
PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "FTP_PROXY")
WITH_PASSWORD = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/@\s:]*:[^/@\s]+@")
BASH_WITH_PASSWORD = r"^[A-Za-z][A-Za-z0-9+.-]*://[^/@[:space:]:]*:[^/@[:space:]]+@"  # noqa: S105 - a pattern, no password
r"""The same in bash's POSIX classes (``\s`` in a bracket is no class there)."""


def is_secret(name: str, value: str = "") -> bool:
    """Whether a variable must not reach a process an engine starts."""
    upper = name.upper()
    if upper in KEPT or upper in PROXIES:
        return False
    words = upper.split("_")
    return (
        upper.startswith("CONDENSATE_")
        or upper in PROVIDER_KEYS
        or words[-1] == "KEY"
        or not WORDS.isdisjoint(words)
        or any(word.endswith(ENDINGS) for word in words)
        or WITH_PASSWORD.match(value) is not None
    )


def scrubbed(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without its secrets."""
    return {name: value for name, value in environ.items() if not is_secret(name, value)}


def _bash_patterns() -> str:
    """``is_secret``'s name rules as the patterns of a bash ``case`` on the upper-cased name."""
    patterns = ["CONDENSATE_*", "KEY", "*_KEY", *sorted(PROVIDER_KEYS)]
    for word in sorted(WORDS):
        patterns += [word, f"{word}_*", f"*_{word}", f"*_{word}_*"]
    for end in ENDINGS:
        patterns += [f"*{end}", f"*{end}_*"]
    return "|".join(patterns)


UNSET_SECRETS = (
    "for __v in $(compgen -e); do "
    f'case "${{__v^^}}" in {"|".join(sorted(KEPT | set(PROXIES)))}) continue;; esac; '
    f'case "${{__v^^}}" in {_bash_patterns()}) unset "$__v" 2>/dev/null; continue;; esac; '
    f'[[ "${{!__v}}" =~ {BASH_WITH_PASSWORD} ]] && unset "$__v" 2>/dev/null; '
    "done; unset __v; "
)
"""``is_secret`` again in bash, for what a login profile exported after the environment was
scrubbed; put before a command on its first line, so bash's line numbers stay the command's."""
