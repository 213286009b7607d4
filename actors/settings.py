"""Configuration, read once from the environment with pydantic-settings.

Every secret is whitespace-stripped on load: a key pasted with a trailing newline would
otherwise make every request fail with a protocol error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from actors.common.errors import IriisError

# "speech" is speech to text (/audio/transcriptions); "tts" is text to speech (/audio/speech).
Kind = Literal["chat", "vision", "speech", "tts"]


class ProviderConfig(BaseModel):
    """One OpenAI-compatible provider as given in IRIIS_PROVIDERS."""

    name: str = Field(min_length=1)
    base_url: str = Field(min_length=1)
    api_key_env: str | None = None
    models: list[str] = Field(min_length=1)
    kinds: list[Kind] = Field(default_factory=lambda: ["chat"])
    max_images: int = Field(default=8, ge=0)
    # Substrings of model ids that discovery may add as backups (e.g. "flash"), so a retired
    # model name is covered without a deploy.
    backup_patterns: list[str] = Field(default_factory=list)
    # The resolved key travels with the config so actors on other nodes need not see our env.
    api_key: str | None = None

    @field_validator("base_url", "name")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip().rstrip("/") if value else value


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="", case_sensitive=False, extra="ignore")

    iriis_home: Path = Path("~/.iriis")
    iriis_host: str = "127.0.0.1"
    iriis_port: int = Field(default=8000, ge=1, le=65535)
    iriis_owner_keys: Annotated[list[str], NoDecode] = Field(default_factory=list)
    database_url: str | None = None
    ray_address: str | None = None
    openai_base_url: str | None = None
    openai_api_key: str | None = None
    iriis_chat_model: str | None = None
    # A cheaper model for memory's own calls (reflection, playbook, consolidation, persona);
    # unset, they share the chat models.
    iriis_learning_model: str | None = None
    iriis_providers: Annotated[list[ProviderConfig], NoDecode] = Field(default_factory=list)
    # How long conversation writes may sit in memory before a batch flush.
    iriis_flush_seconds: float = Field(default=180.0, gt=0)
    # Idle actors exit so a thousand quiet conversations cost nothing.
    iriis_session_idle_seconds: float = Field(default=600.0, gt=0)
    # Warm SessionActors kept ready so a new conversation does not wait for a process start,
    # and a custom Ray resource (cluster.yaml's `agent_node`) whose nodes they prefer.
    iriis_session_spares: int = Field(default=2, ge=0, le=64)
    iriis_session_prefer_resource: str = ""
    # Session actor processes started at once when a burst of new conversations finds no spare:
    # the rest wait their turn (in order) instead of sharing the cores with every other start.
    iriis_session_cold_starts: int = Field(default=2, ge=1, le=64)
    # A new conversation whose estimated wait in that queue is longer than this is answered
    # 503 with Retry-After at once (background turns wait however long).
    iriis_session_start_wait: float = Field(default=30.0, gt=0)
    # Conversation actor processes alive at once (live conversations, spares and starts; each
    # 110-190 MB). At the cap a new conversation lets the least recently used idle one go (it is
    # rebuilt from the store on its next use); with every one busy, a person's new conversation
    # gets 503 with Retry-After and a background one waits. 0: a quarter of the machine's
    # memory over 200 MiB each, 4 to 256 (actors/session/admission.py).
    iriis_session_max_live: int = Field(default=0, ge=0, le=4096)
    # Memory on (the default) or off: off, no memory block reaches the prompt and nothing is
    # learned from turns (the memory tools are mcp.yaml's to switch off).
    iriis_memory: bool = True
    # Backpressure: HTTP requests one gateway replica handles at once before it answers 503
    # with Retry-After (WebSockets are not counted).
    iriis_gateway_max_ongoing: int = Field(default=200, ge=1)
    # Where Serve runs its HTTP proxies on a cluster: every node with a replica, or the head only.
    iriis_proxy_location: Literal["EveryNode", "HeadOnly"] = "EveryNode"
    iriis_retry_after_seconds: int = Field(default=2, ge=1)
    iriis_provider_timeout: float = Field(default=30.0, gt=0)
    iriis_gateway_replicas: int = Field(default=1, ge=1)
    iriis_agent_replicas: int = Field(default=1, ge=1)
    iriis_web_dir: Path = Path(__file__).resolve().parent.parent / "web"
    iriis_mcp_config: Path = Path(__file__).resolve().parent.parent / "mcp.yaml"
    iriis_max_upload_bytes: int = Field(default=50 * 1024 * 1024, gt=0)
    # The camera assistant (spec section 12): a vision model on the OPENAI_* provider, or
    # IRIIS_PROVIDERS entries whose kinds include "vision".
    iriis_vision_model: str | None = None
    iriis_vision_timeout: float = Field(default=12.0, gt=0)
    iriis_review_timeout: float = Field(default=40.0, gt=0)
    iriis_camera_max_frame_bytes: int = Field(default=1_000_000, ge=1024)
    iriis_camera_idle_seconds: float = Field(default=120.0, gt=0)
    iriis_camera_ocr_every: int = Field(default=3, ge=1)
    # The autonomy loop (spec section 9): the owner's time zone, the hours it stays quiet
    # ("23-7": from 23:00 to 07:00; "" for none) and its daily token budget.
    iriis_timezone: str = "UTC"
    iriis_rest_hours: str = "23-7"
    iriis_autonomy_tokens_per_day: int = Field(default=50_000, ge=0)
    # The local language model (actors/providers/local/): qwen2.5-coder-1.5b, smollm2-135m, off,
    # or a path to a GGUF. Unset: the default model when no hosted chat model is configured.
    iriis_local_model: str | None = None
    # Where its weights are kept (default: IRIIS_HOME/models) and how many CPU threads it uses.
    iriis_models_dir: Path | None = None
    iriis_local_threads: int | None = Field(default=None, ge=1)
    # Notifications and calls (actors/notify, spec section 11). Each channel stays off until it
    # is configured: ntfy until a topic is set, Telegram until a token and a chat id are.
    iriis_ntfy_url: str = "https://ntfy.sh"
    iriis_ntfy_topic: str | None = None
    iriis_ntfy_token: str | None = None
    iriis_telegram_token: str | None = None
    iriis_telegram_chat_id: str | None = None
    iriis_telegram_api: str = "https://api.telegram.org"
    # Where the owner opens the app (call links, Telegram's webhook); unset: http://host:port.
    iriis_public_url: str | None = None
    # The VAPID `sub` claim: a contact for push services.
    iriis_vapid_subject: str = "mailto:owner@iriis.invalid"
    # How often the scheduler looks for due calls, and for notifications to deliver.
    iriis_calls_interval: float = Field(default=10.0, gt=0)
    iriis_notify_interval: float = Field(default=5.0, gt=0)

    @field_validator("iriis_owner_keys", mode="before")
    @classmethod
    def _split_keys(cls, value: Any) -> list[str]:
        if value is None or value == "":
            return []
        if isinstance(value, str):
            value = value.split(",")
        return [k.strip() for k in value if k and k.strip()]

    @field_validator("iriis_providers", mode="before")
    @classmethod
    def _parse_providers(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = value.strip()
            if not value:
                return []
            return json.loads(value)
        return value

    @field_validator(
        "openai_api_key", "openai_base_url", "iriis_chat_model", "iriis_learning_model", "iriis_vision_model",
        "database_url",
        "ray_address",
        "iriis_ntfy_topic", "iriis_ntfy_token", "iriis_telegram_token", "iriis_telegram_chat_id", "iriis_public_url",
        mode="before",
    )
    @classmethod
    def _strip_optional(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = value.strip()
            return value or None
        return value

    @field_validator("iriis_ntfy_url", "iriis_telegram_api", mode="before")
    @classmethod
    def _strip_base(cls, value: Any) -> Any:
        return value.strip().rstrip("/") if isinstance(value, str) else value

    @field_validator("iriis_local_model", "iriis_models_dir", "iriis_local_threads", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("iriis_timezone")
    @classmethod
    def _check_timezone(cls, value: str) -> str:
        value = value.strip() or "UTC"
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"not a known IANA time zone: {value!r}") from None
        return value

    @field_validator("iriis_rest_hours")
    @classmethod
    def _check_rest_hours(cls, value: str) -> str:
        value = value.strip()
        if value:
            start, sep, end = value.partition("-")
            if not (sep and start.strip().isdigit() and end.strip().isdigit()
                    and 0 <= int(start) <= 23 and 0 <= int(end) <= 23):
                raise ValueError("must be two hours 0-23 like 23-7, or empty")
        return value

    @field_validator("database_url")
    @classmethod
    def _check_db(cls, value: str | None) -> str | None:
        if value and not value.startswith(("postgresql://", "postgres://", "sqlite:")):
            raise ValueError("must start with postgresql:// or sqlite:")
        return value

    @model_validator(mode="after")
    def _expand_home(self) -> "Settings":
        self.iriis_home = self.iriis_home.expanduser()
        return self

    def chat_providers(self, environ: dict[str, str]) -> list[ProviderConfig]:
        """Every configured chat provider, keys resolved from the environment."""
        providers: list[ProviderConfig] = []
        if self.openai_base_url or self.openai_api_key:
            providers.append(ProviderConfig(
                name="openai",
                base_url=self.openai_base_url or "https://api.openai.com/v1",
                models=[self.iriis_chat_model or "gpt-4o-mini"],
                kinds=["chat"],
                api_key=self.openai_api_key,
            ))
        for p in self.iriis_providers:
            if "chat" not in p.kinds:
                continue
            key = environ.get(p.api_key_env, "").strip() if p.api_key_env else None
            providers.append(p.model_copy(update={"api_key": key or None}))
        return providers


    def vision_providers(self, environ: dict[str, str]) -> list[ProviderConfig]:
        """Providers that can look at camera frames, keys resolved from the environment."""
        providers: list[ProviderConfig] = []
        if self.iriis_vision_model and (self.openai_base_url or self.openai_api_key):
            providers.append(ProviderConfig(
                name="openai", base_url=self.openai_base_url or "https://api.openai.com/v1",
                models=[self.iriis_vision_model], kinds=["vision"], api_key=self.openai_api_key))
        for p in self.iriis_providers:
            if "vision" not in p.kinds:
                continue
            key = environ.get(p.api_key_env, "").strip() if p.api_key_env else None
            providers.append(p.model_copy(update={"api_key": key or None}))
        return providers

    def learning_providers(self, environ: dict[str, str]) -> list[ProviderConfig] | None:
        """The providers memory's calls use when IRIIS_LEARNING_MODEL names a model of their
        own; None means they share the chat router."""
        if not self.iriis_learning_model:
            return None
        return [p.model_copy(update={"models": [self.iriis_learning_model]})
                for p in self.chat_providers(environ)] or None


class SettingsError(IriisError):
    """A malformed configuration value; the message is one line naming the variable."""

    code = "invalid_settings"


def load_settings(**overrides: Any) -> Settings:
    """Read settings, turning pydantic's multi-line report into one line per the first bad variable."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        err = exc.errors()[0]
        name = str(err["loc"][0]).upper() if err["loc"] else "configuration"
        raise SettingsError(f"{name}: {err['msg']}") from None
    except json.JSONDecodeError as exc:  # pragma: no cover - pydantic wraps these
        raise SettingsError(f"IRIIS_PROVIDERS: not valid JSON ({exc.msg})") from None
