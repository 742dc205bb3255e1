"""Settings from ``CONDENSATE_*`` environment variables. The only reader of ``os.environ``;
components receive the pieces they need, never this object as a global."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from condensate.ceilings import CeilingSettings
from condensate.errors import ConfigError
from condensate.planner import PlannerSettings


def default_home() -> Path:
    """``$XDG_STATE_HOME/condensate``, else ``~/.local/state/condensate``."""
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "state"
    return base / "condensate"


class Settings(BaseSettings):
    """Every setting, each read from ``CONDENSATE_<NAME>``.

    >>> Settings(home=Path("/tmp/c"))                 # tests build settings directly
    >>> CONDENSATE_WINDOW_CEILING=90000 condensate …  # cap every engine's ceiling at 90k
    """

    model_config = SettingsConfigDict(env_prefix="CONDENSATE_", extra="ignore", frozen=True)

    home: Path = Field(default_factory=default_home)
    log_format: Literal["json", "console", "auto"] = "auto"
    window_ceiling: int | None = Field(default=None, gt=0)
    window_ceiling_claude: int | None = Field(default=None, gt=0)
    window_ceiling_pi: int | None = Field(default=None, gt=0)
    output_reserve: int = Field(default=8_192, ge=0)
    tool_room: int = Field(default=8_192, ge=0)
    window_deadline_ms: int | None = Field(default=None, gt=0)

    @property
    def db_path(self) -> Path:
        return self.home / "condensate.db"

    def ceilings(self) -> CeilingSettings:
        return CeilingSettings(
            cap_all=self.window_ceiling,
            cap_claude=self.window_ceiling_claude,
            cap_pi=self.window_ceiling_pi,
            output_reserve=self.output_reserve,
            tool_room=self.tool_room,
        )

    def planner(self) -> PlannerSettings:
        override = self.window_deadline_ms
        return PlannerSettings(
            deadline_override=None if override is None else timedelta(milliseconds=override)
        )


def load_settings() -> Settings:
    """Settings from the environment; a bad value names its variable."""
    try:
        return Settings()
    except ValidationError as exc:
        problems = "; ".join(
            f"CONDENSATE_{'_'.join(str(p) for p in err['loc']).upper()}: {err['msg']}"
            for err in exc.errors()
        )
        msg = f"Invalid settings: {problems}."
        raise ConfigError(msg) from exc
