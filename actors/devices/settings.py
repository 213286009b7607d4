"""Device limits from the environment (IRIIS_DEVICE_*). The defaults are the spec's numbers;
tests shorten the time-based ones so they run in seconds."""

from __future__ import annotations

from pydantic import BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class DeviceLimits(BaseModel):
    """Everything the protocol enforces, in one value that crosses Ray by copy."""

    max_frame_bytes: int = 1_048_576
    hello_seconds: float = 15.0
    call_seconds: float = 25.0
    calls_in_flight: int = 4
    max_tools: int = 40
    max_parameters_bytes: int = 8192
    event_seconds: float = 30.0
    silence_seconds: float = 90.0
    ping_seconds: float = 30.0
    code_seconds: float = 600.0
    pair_failures: int = 5
    pair_window_seconds: float = 900.0
    event_keep_seconds: float = 7 * 24 * 3600.0
    events_per_person: int = 200
    title_chars: int = 120
    text_chars: int = 1000


class DeviceSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="IRIIS_DEVICE_", case_sensitive=False, extra="ignore")

    call_seconds: float = Field(default=25.0, gt=0)
    hello_seconds: float = Field(default=15.0, gt=0)
    event_seconds: float = Field(default=30.0, gt=0)
    silence_seconds: float = Field(default=90.0, gt=0)
    ping_seconds: float = Field(default=30.0, gt=0)
    pair_window_seconds: float = Field(default=900.0, gt=0)
    # Where devices are told to reach the server in pairing links (https://<server>/pair#code=).
    public_url: str = ""

    def limits(self) -> DeviceLimits:
        return DeviceLimits(call_seconds=self.call_seconds, hello_seconds=self.hello_seconds,
                            event_seconds=self.event_seconds, silence_seconds=self.silence_seconds,
                            ping_seconds=self.ping_seconds, pair_window_seconds=self.pair_window_seconds)
