"""Compose the Serve application: Gateway (ingress) bound to the AgentLoop."""

from __future__ import annotations

from pydantic import BaseModel, Field
from ray.serve import Application

from actors.camera.actor import CameraConfig
from actors.session.actor import SessionConfig
from actors.settings import ProviderConfig, Settings
from actors.tools.config import McpConfig
from actors.providers.local.wiring import local_config
from serve_apps.deployments.agent_loop import AgentLoop, AgentLoopConfig
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


class AppArgs(BaseModel):
    """What `build_app` composes the application from (`iriis serve` and the config file's
    builder fill it in the same way)."""

    settings: Settings
    database_url: str
    key_hashes: list[str]                                   # the owner keys' hashes
    providers: list[ProviderConfig] = Field(default_factory=list)
    mcp: McpConfig
    port: int | None = None                                 # None: IRIIS_PORT
    learning: list[ProviderConfig] = Field(default_factory=list)
    vision: list[ProviderConfig] = Field(default_factory=list)
    gpus: float = 0.0                                       # a fraction of a GPU per Perception replica


def build_app(args: AppArgs) -> Application:
    settings, database_url = args.settings, args.database_url
    port = args.port or settings.iriis_port
    agent = AgentLoop.options(
        autoscaling_config={"min_replicas": 1, "max_replicas": max(1, settings.iriis_agent_replicas),
                            "target_ongoing_requests": 16},
    ).bind(AgentLoopConfig(providers=args.providers, timeout=settings.iriis_provider_timeout,
                           database_url=database_url, workspace=str(settings.iriis_home / "workspace"),
                           mcp=args.mcp, learning=args.learning,
                           local=local_config(settings, hosted=bool(args.providers))))
    config = GatewayConfig(
        owner_key_hashes=args.key_hashes,
        database_url=database_url,
        web_dir=str(settings.iriis_web_dir),
        max_upload_bytes=settings.iriis_max_upload_bytes,
        hosts=sorted({f"{settings.iriis_host}:{port}", f"127.0.0.1:{port}", f"localhost:{port}"}),
        session=session_config(settings, database_url),
        camera=CameraConfig(database_url=database_url, vision=[p.model_dump() for p in args.vision],
                            timeout=settings.iriis_vision_timeout, review_timeout=settings.iriis_review_timeout,
                            idle_seconds=settings.iriis_camera_idle_seconds, ocr_every=settings.iriis_camera_ocr_every,
                            max_frame_bytes=settings.iriis_camera_max_frame_bytes),
    )
    limit = settings.iriis_gateway_max_ongoing
    return Gateway.options(num_replicas=settings.iriis_gateway_replicas, **serve_limits(limit),
                           backpressure_config={"retry_after_s": settings.iriis_retry_after_seconds}).bind(
        agent=agent, config=config, perception=perception_app(args.gpus), max_ongoing=limit,
        retry_after=settings.iriis_retry_after_seconds)
