"""Settings from ``CONDENSATE_*`` environment variables: the daemon's here, each engine's in its
``EngineSettings``, all read through ``read_settings`` (the one reader of the environment, with
``default_home``). Components receive the pieces they need, never this object as a global."""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from condensate.config import read_settings
from condensate.core.ceilings import CeilingSettings
from condensate.core.planner import PlannerSettings
from condensate.core.prices import Price
from condensate.core.receipts import bare_tool
from condensate.core.summary import CuratorSettings
from condensate.core.tiers import TierSettings
from condensate.providers import Endpoint, ProviderSettings
from condensate.providers._http import RetryPolicy, Timeouts


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

    model_config = SettingsConfigDict(
        env_prefix="CONDENSATE_", extra="ignore", frozen=True, populate_by_name=True
    )

    home: Path = Field(default_factory=default_home)
    host: str = "127.0.0.1"
    port: int = Field(default=4741, ge=0, le=65535)
    url: str | None = None
    """Where the command line finds the daemon (default: what the daemon wrote at start)."""
    allowed_hosts: list[str] = Field(default_factory=list)
    """Extra Host names the API answers to, as JSON: ``["condensate.local"]``."""
    notify_socket: str | None = Field(default=None, validation_alias="NOTIFY_SOCKET")
    log_format: Literal["json", "console", "auto"] = "auto"
    window_ceiling: int | None = Field(default=None, gt=0)
    output_reserve: int = Field(default=8_192, ge=0)
    tool_room: int = Field(default=8_192, ge=0)
    window_deadline_ms: int | None = Field(default=None, gt=0)
    window_target: float = Field(default=TierSettings().target_share, gt=0, le=1)
    """The share of the line a window cuts down to."""
    window_early: float = Field(default=TierSettings().early_share or 0.0, ge=0, le=1)
    """A cheap window runs before the line once it frees this share of it (0: never)."""
    window_keep_pairs: int = Field(default=TierSettings().keep_pairs, ge=0, le=1000)
    """Recent tool results cheap tiers keep verbatim (the latest batch's always)."""
    window_exclude_tools: list[str] = Field(default_factory=list)
    """Tools whose results cheap tiers never clear, as JSON: ``["Edit", "apply_patch"]``."""
    clamp_tokens: int = Field(default=TierSettings().clamp_tokens or 0, ge=0, le=10_000_000)
    """Any one message, result or argument over this many tokens keeps its head and tail in
    a new thread's view (0: nothing clamped)."""

    anthropic_base_url: str = "https://api.anthropic.com"
    anthropic_api_key: str = Field(
        default="",
        validation_alias=AliasChoices("CONDENSATE_ANTHROPIC_API_KEY", "ANTHROPIC_API_KEY"),
    )
    anthropic_auth_token: str = Field(
        default="",
        validation_alias=AliasChoices("CONDENSATE_ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_AUTH_TOKEN"),
    )
    """A Claude subscription's OAuth token (``claude setup-token``): the gateway sends it as a
    bearer token in place of an API key."""
    openai_base_url: str = "https://api.openai.com/v1"
    openai_api_key: str = Field(
        default="", validation_alias=AliasChoices("CONDENSATE_OPENAI_API_KEY", "OPENAI_API_KEY")
    )
    chatgpt_base_url: str = "https://chatgpt.com/backend-api/codex"
    """Where the gateway sends a person's own Codex requests signed in with ChatGPT (not an
    API key): the subscription's backend, as Codex itself does."""
    chat_base_url: str = "http://127.0.0.1:8000/v1"
    chat_api_key: str = "none"
    provider_retries: int = Field(default=3, ge=0, le=10)
    provider_timeout_s: float = Field(default=600.0, gt=0)
    """The deadline for one whole provider call, every retry and wait included."""
    provider_read_timeout_s: float = Field(default=120.0, gt=0)
    """The longest a provider may stay silent: before its headers, or between two chunks."""
    prices: dict[str, Price] = Field(
        default_factory=dict,
        validation_alias=AliasChoices("CONDENSATE_PRICES", "CONDENSATE_MODEL_PRICES"),
    )
    """List prices by model, over the built-in table's, US dollars per million tokens, as
    JSON: ``{"openai:gpt-7": {"input": 2, "output": 16, "cache_read": 0.2}}``. Only
    ``input`` and ``output`` are required (``condensate.core.prices.Price``). The variable's old
    name, ``CONDENSATE_MODEL_PRICES``, is still read."""
    model_windows: dict[str, int] = Field(default_factory=dict)
    """Explicit windows by model, as JSON: ``{"chat:qwen3-coder": 32768}``."""

    curator_model: str | None = None
    curator_fallback_model: str | None = None
    hindsight_url: str | None = None
    hindsight_bank: str = "condensate"
    database_url: str | None = None
    """A PostgreSQL URL (``postgresql://user@host:port/db``): the event log lives there
    instead of the SQLite file in ``home``, and may be shared by a fleet of daemons."""
    daemon_id: str | None = None
    """This daemon's name in a fleet (default: its host and state directory)."""
    usage_webhook: str | None = None
    """A URL the daemon POSTs each model call's usage to, as JSON (the operator's stream)."""
    lease_seconds: float = Field(default=15.0, ge=1.0, le=3600.0)
    """How long a daemon of a fleet owns a thread without renewing (every third of it)."""

    @property
    def db_path(self) -> Path:
        return self.home / "condensate.db"

    def ceilings(self) -> CeilingSettings:
        """The daemon's part of every thread's ceilings (``engines.profile`` adds the
        engine's share and caps)."""
        return CeilingSettings(
            cap_all=self.window_ceiling,
            output_reserve=self.output_reserve,
            tool_room=self.tool_room,
        )

    def planner(self) -> PlannerSettings:
        override = self.window_deadline_ms
        tiers = replace(
            TierSettings(),
            target_share=self.window_target,
            early_share=self.window_early or None,
            keep_pairs=self.window_keep_pairs,
            exclude_tools=frozenset(bare_tool(t) for t in self.window_exclude_tools),
            clamp_tokens=self.clamp_tokens or None,
        )
        return PlannerSettings(
            tiers=tiers,
            deadline_override=None if override is None else timedelta(milliseconds=override),
        )

    def providers(self) -> ProviderSettings:
        return ProviderSettings(
            anthropic=Endpoint(self.anthropic_base_url, self.anthropic_api_key),
            openai=Endpoint(self.openai_base_url, self.openai_api_key),
            chat=Endpoint(self.chat_base_url, self.chat_api_key),
            retry=RetryPolicy(max_retries=self.provider_retries),
            timeouts=Timeouts(call=self.provider_timeout_s, read=self.provider_read_timeout_s),
        )

    def curator(self) -> CuratorSettings:
        override = self.window_deadline_ms
        return CuratorSettings(
            model=self.curator_model,
            fallback_model=self.curator_fallback_model,
            hindsight_url=self.hindsight_url,
            hindsight_bank=self.hindsight_bank,
            deadline_override=None if override is None else timedelta(milliseconds=override),
            max_tokens=PlannerSettings().tiers.summary_budget,
        )


def load_settings() -> Settings:
    """The daemon's settings: the environment, then the configuration file (``config``); a
    bad value names its variable."""
    return read_settings(Settings)
