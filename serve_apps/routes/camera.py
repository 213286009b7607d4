"""The camera assistant's plain HTTP routes: the owner's procedures (steps with acceptance
criteria, instruments with span and unit). The camera socket is serve_apps/sockets/camera.py."""

from typing import Any

from fastapi import APIRouter, Request

from actors.camera import procedures
from serve_apps.http.errors import ApiError, gateway_of
from vision.procedure import ProcedureCreate

router = APIRouter()


@router.post("/v1/procedures", status_code=201)
async def procedure_create(body: ProcedureCreate, request: Request) -> dict[str, Any]:
    """Define a procedure (steps with acceptance criteria, instruments with span and unit)."""
    gw = gateway_of(request)
    gw.owner(request)
    procedure_id = await procedures.create(gw.store, body)
    return {"id": procedure_id, **body.model_dump(mode="json")}


@router.get("/v1/procedures")
async def procedure_list(request: Request) -> dict[str, Any]:
    gw = gateway_of(request)
    gw.owner(request)
    data = await procedures.list_all(gw.store)
    return {"data": data, "count": len(data)}


@router.get("/v1/procedures/{procedure_id}")
async def procedure_get(procedure_id: int, request: Request) -> dict[str, Any]:
    gw = gateway_of(request)
    gw.owner(request)
    found = await procedures.get(gw.store, procedure_id)
    if found is None:
        raise ApiError(404, "not_found", "No procedure with that id.")
    return {"id": procedure_id, **found.model_dump(mode="json")}


@router.delete("/v1/procedures/{procedure_id}")
async def procedure_delete(procedure_id: int, request: Request) -> dict[str, Any]:
    gw = gateway_of(request)
    gw.owner(request)
    if not await procedures.delete(gw.store, procedure_id):
        raise ApiError(404, "not_found", "No procedure with that id.")
    return {"id": procedure_id, "deleted": True}
