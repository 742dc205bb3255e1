"""The docs stay true: every setting is on the configuration page, the README stays short and
gives CI's test command and the quickstart's first run, and runnable blocks are marked the one
way the docs' test finds."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic_settings import BaseSettings

from condensate.engine.registry import installed
from condensate.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text()
CONFIGURATION = (DOCS / "configuration.md").read_text()
RUNNABLE = "<!-- runnable -->"
FENCE = ["```bash"]
FAKE_BLOCK = re.compile(r"^<!-- quickstart:fake -->\n```bash\n.*?```$", re.S | re.M)


def test_every_setting_is_documented():
    """Each CONDENSATE_* variable the daemon's settings and every installed engine's read
    has a row of the configuration page's table."""
    kinds: list[type[BaseSettings]] = [Settings, *(i.settings for i in installed().values())]
    names = [
        f"CONDENSATE_{name.upper()}"
        for kind in kinds
        for name, field in kind.model_fields.items()
        if field.validation_alias is None or "CONDENSATE" in str(field.validation_alias)
    ]
    assert "CONDENSATE_CODEX_WINDOWING" in names
    rows = set(re.findall(r"^\| `(CONDENSATE_[A-Z0-9_]+)` \|", CONFIGURATION, re.M))
    missing = [n for n in names if n not in rows]
    assert missing == []


def test_ci_runs_the_readme_test_command():
    """.ci/run calls scripts/test, the command the README gives for running the tests."""
    assert "scripts/test" in README
    assert "scripts/test" in (ROOT / ".ci" / "run").read_text()


def test_readme_is_at_most_200_lines():
    """The README says what Condensate is, how to set it up and run it, and links into docs/:
    at most 200 lines."""
    assert len(README.splitlines()) <= 200


def test_readme_first_run_is_the_quickstart_block():
    """The README's first run is the quickstart page's ``fake`` block, word for word, so the
    quickstart test runs both."""
    readme = FAKE_BLOCK.search(README)
    quickstart = FAKE_BLOCK.search((DOCS / "quickstart.md").read_text())
    assert readme is not None
    assert quickstart is not None
    assert readme[0] == quickstart[0]


def test_readme_links_reach_existing_files():
    """Every relative link of the README names a file of the repository (the site's pages
    are checked by ``mkdocs build --strict``; the README is not part of the site)."""
    targets = re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", README)
    assert targets
    assert [t for t in targets if not (ROOT / t).exists()] == []


def test_a_runnable_marker_stands_right_before_a_bash_fence():
    """``<!-- runnable -->`` stands alone on its line, right before a ```` ```bash ```` fence:
    a marker anywhere else would mark nothing the docs' test runs."""
    stray = []
    for page in sorted(DOCS.rglob("*.md")):
        lines = page.read_text().splitlines()
        for number, line in enumerate(lines):
            if RUNNABLE in line and (line != RUNNABLE or lines[number + 1 : number + 2] != FENCE):
                stray.append(f"{page.relative_to(ROOT)}:{number + 1}")
    assert stray == []
