"""The installable app's root-scoped files: the web manifest, the service worker (which must
be served from / to control the whole origin), the icons, and the /pair page link target.

No `from __future__ import annotations`: FastAPI must see real types in the route signatures.
"""

from fastapi import APIRouter
from fastapi.responses import FileResponse

from serve_apps.http.deps import GatewayDep
from serve_apps.http.errors import ApiError

router = APIRouter()
ICONS = {"icon-192.png", "icon-512.png", "icon-maskable-192.png", "icon-maskable-512.png", "badge-96.png"}
NO_CACHE = {"Cache-Control": "no-cache"}


@router.get("/manifest.webmanifest", include_in_schema=False)
async def manifest(gw: GatewayDep) -> FileResponse:
    return FileResponse(gw.web_dir / "manifest.webmanifest", media_type="application/manifest+json",
                        headers=NO_CACHE)


@router.get("/sw.js", include_in_schema=False)
async def service_worker(gw: GatewayDep) -> FileResponse:
    # Never cached by HTTP: the browser must see a new worker as soon as one ships.
    return FileResponse(gw.web_dir / "sw.js", media_type="text/javascript",
                        headers={**NO_CACHE, "Service-Worker-Allowed": "/"})


@router.get("/icons/{name}", include_in_schema=False)
async def icon(name: str, gw: GatewayDep) -> FileResponse:
    if name not in ICONS:
        raise ApiError(404, "not_found", "No such icon.")
    return FileResponse(gw.web_dir / "icons" / name, media_type="image/png",
                        headers={"Cache-Control": "public, max-age=86400"})


@router.get("/pair", include_in_schema=False)
async def pair_page(gw: GatewayDep) -> FileResponse:
    """The QR code's https://<server>/pair#code=... opens the app, which shows the code."""
    return FileResponse(gw.web_dir / "index.html", headers=NO_CACHE)
