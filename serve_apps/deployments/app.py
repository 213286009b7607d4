"""Compose the Serve application: Gateway (ingress) bound to the AgentLoop."""

from __future__ import annotations

from typing import Any

from actors.camera.actor import CameraConfig
from actors.session.actor import SessionConfig
from actors.settings import ProviderConfig, Settings
from actors.tools.config import McpConfig
from actors.providers.local.wiring import local_config
from serve_apps.deployments.agent_loop import AgentLoop
from serve_apps.deployments.backpressure import serve_limits
from serve_apps.deployments.gateway import Gateway
from serve_apps.deployments.perception import perception_app
from serve_apps.http.context import GatewayConfig


def session_config(settings: Settings, database_url: str) -> SessionConfig:
    """How conversations run, for the gateway's and the scheduler's alike."""
    return SessionConfig(database_url=database_url, flush_seconds=settings.iriis_flush_seconds,
                         idle_seconds=settings.iriis_session_idle_seconds, spares=settings.iriis_session_spares,
                         prefer_resource=settings.iriis_session_prefer_resource,
                         cold_starts=settings.iriis_session_cold_starts,
                         start_wait=settings.iriis_session_start_wait,
                         max_live=settings.iriis_session_max_live, memory=settings.iriis_memory)


def build_app(settings: Settings, database_url: str, key_hashes: list[str],
              providers: list[ProviderConfig], mcp: McpConfig, port: int | None = None,
              learning: list[ProviderConfig] | None = None, vision: list[ProviderConfig] | None = None,
              gpus: float = 0.0) -> Any:
    port = port or settings.iriis_port
    agent = AgentLoop.options(
        autoscaling_config={"min_replicas": 1, "max_replicas": max(1, settings.iriis_agent_replicas),
                            "target_ongoing_requests": 16},
    ).bind([p.model_dump() for p in providers], settings.iriis_provider_timeout, database_url,
           str(settings.iriis_home / "workspace"), mcp.model_dump(),
           [p.model_dump() for p in learning] if learning else None,
           local_config(settings, hosted=bool(providers)))
    config = GatewayConfig(
        owner_key_hashes=key_hashes,
        database_url=database_url,
        web_dir=str(settings.iriis_web_dir),
        max_upload_bytes=settings.iriis_max_upload_bytes,
        hosts=sorted({f"{settings.iriis_host}:{port}", f"127.0.0.1:{port}", f"localhost:{port}"}),
        session=session_config(settings, database_url),
        camera=CameraConfig(database_url=database_url, vision=[p.model_dump() for p in vision or []],
                            timeout=settings.iriis_vision_timeout, review_timeout=settings.iriis_review_timeout,
                            idle_seconds=settings.iriis_camera_idle_seconds, ocr_every=settings.iriis_camera_ocr_every,
                            max_frame_bytes=settings.iriis_camera_max_frame_bytes),
    )
    limit = settings.iriis_gateway_max_ongoing
    return Gateway.options(num_replicas=settings.iriis_gateway_replicas, **serve_limits(limit),
                           backpressure_config={"retry_after_s": settings.iriis_retry_after_seconds}).bind(
        agent=agent, config=config, perception=perception_app(gpus), max_ongoing=limit,
        retry_after=settings.iriis_retry_after_seconds)
