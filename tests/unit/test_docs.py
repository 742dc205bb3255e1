"""The README stays true: every setting is documented, and its test command is CI's."""

from __future__ import annotations

from pathlib import Path

from pydantic_settings import BaseSettings

from condensate.engines import installed
from condensate.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def test_every_setting_is_documented():
    """Each CONDENSATE_* variable the daemon's settings and every installed engine's read
    appears in the README's table."""
    kinds: list[type[BaseSettings]] = [Settings, *(i.settings for i in installed().values())]
    names = [
        f"CONDENSATE_{name.upper()}"
        for kind in kinds
        for name, field in kind.model_fields.items()
        if field.validation_alias is None or "CONDENSATE" in str(field.validation_alias)
    ]
    assert "CONDENSATE_CODEX_WINDOWING" in names
    missing = [n for n in names if f"`{n}`" not in README]
    assert missing == []


def test_ci_runs_the_readme_test_command():
    """.ci/run calls scripts/test, the command the README gives for running the tests."""
    assert "scripts/test" in README
    assert "scripts/test" in (ROOT / ".ci" / "run").read_text()
