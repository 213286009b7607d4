"""The camera assistant's plain HTTP routes: the owner's procedures (steps with acceptance
criteria, instruments with span and unit). The camera socket is serve_apps/sockets/camera.py.

No `from __future__ import annotations`: FastAPI reads these types at import time.
"""

from fastapi import APIRouter
from pydantic import ConfigDict

from actors.camera import procedures
from serve_apps.http.deps import Owner, StoreDep
from serve_apps.http.errors import ApiError
from serve_apps.http.ids import RowId
from serve_apps.http.models import Deleted, Page, page
from vision.procedure import ProcedureCreate

router = APIRouter()


class ProcedurePublic(ProcedureCreate):
    """A stored procedure: its definition, its id and (in lists) when it was made."""

    model_config = ConfigDict(extra="allow")
    id: int


class ProcedureList(Page[ProcedurePublic]):
    pass


@router.post("/procedures", status_code=201, response_model=ProcedurePublic)
async def procedure_create(body: ProcedureCreate, _owner: Owner, store: StoreDep) -> ProcedurePublic:
    """Define a procedure (steps with acceptance criteria, instruments with span and unit)."""
    procedure_id = await procedures.create(store, body)
    return ProcedurePublic(id=procedure_id, **body.model_dump(mode="json"))


@router.get("/procedures", response_model=ProcedureList)
async def procedure_list(_owner: Owner, store: StoreDep) -> ProcedureList:
    return page(ProcedureList, await procedures.list_all(store))


@router.get("/procedures/{procedure_id}", response_model=ProcedurePublic)
async def procedure_get(procedure_id: RowId, _owner: Owner, store: StoreDep) -> ProcedurePublic:
    found = await procedures.get(store, procedure_id)
    if found is None:
        raise ApiError(404, "not_found", "No procedure with that id.")
    return ProcedurePublic(id=procedure_id, **found.model_dump(mode="json"))


@router.delete("/procedures/{procedure_id}", response_model=Deleted)
async def procedure_delete(procedure_id: RowId, _owner: Owner, store: StoreDep) -> Deleted:
    if not await procedures.delete(store, procedure_id):
        raise ApiError(404, "not_found", "No procedure with that id.")
    return Deleted(id=procedure_id, deleted=True)
