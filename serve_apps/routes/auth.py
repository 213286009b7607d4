"""The owner key as the page's cookie: setting it, dropping it, and checking a key.

No `from __future__ import annotations`: FastAPI must see real types in the route signatures.
"""

from fastapi import APIRouter, Request
from fastapi.responses import Response

from serve_apps.http.auth import COOKIE_NAME, presented_key
from serve_apps.http.deps import GatewayDep, Owner
from serve_apps.http.errors import ApiError
from serve_apps.http.models import AuthCheck

router = APIRouter()
COOKIE_SECONDS = 30 * 24 * 3600


@router.post("/v1/auth/cookie", status_code=204, response_model=None)
async def set_cookie(request: Request, gw: GatewayDep) -> Response:
    key = presented_key(request)
    if not gw.owner_key(key):
        raise ApiError(401, "unauthorized", "That key was not accepted.")
    response = Response(status_code=204)
    response.set_cookie(COOKIE_NAME, key or "", httponly=True, samesite="strict",
                        max_age=COOKIE_SECONDS, path="/", secure=request.url.scheme == "https")
    return response


@router.post("/v1/auth/logout", status_code=204, response_model=None)
async def logout() -> Response:
    response = Response(status_code=204)
    response.delete_cookie(COOKIE_NAME, path="/")
    return response


@router.get("/v1/auth/check")
async def auth_check(_owner: Owner) -> AuthCheck:
    return AuthCheck(ok=True)
