"""Relay configuration from the environment (IRIIS_RELAY_*), over the spec's defaults."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from actors.relay.limits import RelayLimits


class RelaySettings(BaseSettings, RelayLimits):
    """Every cap of RelayLimits, each readable as IRIIS_RELAY_<NAME>, plus the server's own knobs."""

    model_config = SettingsConfigDict(env_prefix="IRIIS_RELAY_", case_sensitive=False, extra="ignore")
    # How often the sweeper looks for sessions to warn about or purge.
    sweep_seconds: float = Field(default=60.0, gt=0)
    # Where peers reach the relay (TLS); port 0 picks a free one. Candidate addresses for the
    # token come from the interfaces unless `advertise` names them (comma-separated host[:port]).
    tls_addr: str = "0.0.0.0:7434"
    advertise: str = ""
    # Tests only: POST /_admin/clock and /_admin/sweep on the localhost listener move time.
    test_clock: bool = False
    actor_idle_seconds: float = Field(default=300.0, gt=0)
    # On a cluster: a Ray custom resource the session actors prefer (soft). Set it only when the
    # data directory is on storage those nodes share (the actors write the session's files).
    prefer_resource: str = ""

    def limits(self) -> RelayLimits:
        return RelayLimits(**{name: getattr(self, name) for name in RelayLimits.model_fields})
