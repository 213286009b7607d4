"""Memory as JSON lines, in and out: one item per line with every field (kind, text, importance,
uses, active, created, last_used, and provenance, null for the owner's own words), so the owner can move their memory between stores or bring it
from another assistant with each item's history.

Parsing is all-or-nothing: every line is checked first and any error (with its line number) means
nothing is written. Limits: at most MAX_IMPORT_BYTES in the body, MAX_IMPORT_LINES items, and the
same text limit as POST /v1/memory (MAX_TEXT). Blank lines are skipped; an `id` field is ignored
(items get new ids in the receiving store). Pure: no store.
"""

from __future__ import annotations

import json
import math

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from actors.common.errors import IriisError
from actors.memory.model import Kind, MindItem
from actors.memory.secrets import looks_secret

MAX_IMPORT_BYTES = 8 * 1024 * 1024
MAX_IMPORT_LINES = 20_000
MAX_TEXT = 2000
# A timestamp may run ahead of this clock by a day (another machine's clock), no more.
FUTURE_SLACK_S = 86_400.0


class MemoryRecord(BaseModel):
    """One exported item. Only `kind` and `text` are required on import."""

    model_config = ConfigDict(extra="ignore")

    kind: Kind
    text: str = Field(min_length=1, max_length=MAX_TEXT)
    importance: float = Field(default=5.0, ge=1, le=10)
    uses: int = Field(default=0, ge=0)
    active: bool = True
    created: float | None = None
    last_used: float | None = None
    # The untrusted sources an item was learned from (None: the owner's own words), carried so a
    # round trip never turns something read on a web page into something the owner said.
    provenance: str | None = Field(default=None, max_length=MAX_TEXT)

    @field_validator("text")
    @classmethod
    def _strip(cls, value: str) -> str:
        value = value.strip()
        if not value:
            raise ValueError("text is blank")
        return value

    @field_validator("created", "last_used")
    @classmethod
    def _finite(cls, value: float | None) -> float | None:
        if value is not None and (not math.isfinite(value) or value < 0):
            raise ValueError("must be a non-negative number of seconds since 1970")
        return value

    @model_validator(mode="after")
    def _order(self) -> MemoryRecord:
        if self.created is not None and self.last_used is not None and self.last_used < self.created:
            raise ValueError("last_used is before created")
        return self

    @classmethod
    def of(cls, item: MindItem) -> MemoryRecord:
        return cls(kind=item.kind, text=item.text, importance=item.importance, uses=item.uses,
                   active=item.active, created=item.created, last_used=item.last_used or None,
                   provenance=item.provenance)


class LineError(BaseModel):
    line: int
    code: str
    message: str


class ImportTooLarge(IriisError, ValueError):
    """The body is over MAX_IMPORT_BYTES or has more than MAX_IMPORT_LINES items."""

    code = "too_large"


def export_line(item: MindItem) -> str:
    return MemoryRecord.of(item).model_dump_json() + "\n"


def parse_lines(body: bytes, now: float, max_bytes: int | None = None,
                max_lines: int | None = None) -> tuple[list[MemoryRecord], list[LineError]]:
    """Every record of an ndjson body, or the errors of its bad lines (line numbers from 1).
    Raises ImportTooLarge over the limits (default MAX_IMPORT_BYTES, MAX_IMPORT_LINES).
    A record without `created` gets `now`."""
    max_bytes = MAX_IMPORT_BYTES if max_bytes is None else max_bytes
    max_lines = MAX_IMPORT_LINES if max_lines is None else max_lines
    if len(body) > max_bytes:
        raise ImportTooLarge(f"the body is over {max_bytes} bytes")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return [], [LineError(line=body[:exc.start].count(b"\n") + 1, code="not_utf8",
                              message="the body is not UTF-8")]
    records: list[MemoryRecord] = []
    errors: list[LineError] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if len(records) + len(errors) >= max_lines:
            raise ImportTooLarge(f"more than {max_lines} items")
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            errors.append(LineError(line=number, code="bad_json", message=f"not JSON: {exc.msg}"))
            continue
        if not isinstance(raw, dict):
            errors.append(LineError(line=number, code="bad_json", message="each line must be a JSON object"))
            continue
        try:
            record = MemoryRecord.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "line"
            errors.append(LineError(line=number, code="invalid", message=f"{where}: {first['msg']}"))
            continue
        if looks_secret(record.text):
            errors.append(LineError(line=number, code="secret_refused",
                                    message="that looks like a password, key or PIN; memory does not keep secrets"))
            continue
        latest = max(record.created or 0.0, record.last_used or 0.0)
        if latest > now + FUTURE_SLACK_S:
            errors.append(LineError(line=number, code="invalid", message="a timestamp is in the future"))
            continue
        if record.created is None:
            record = record.model_copy(update={"created": now})
        records.append(record)
    return records, errors
