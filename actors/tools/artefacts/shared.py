"""What every kind of artefact shares: the error a request that cannot be made raises, the MIME
type of each file extension, and a file name made from a title."""

from __future__ import annotations

import re

from actors.common.errors import IriisError


class ArtefactError(IriisError, ValueError):
    """The request cannot become an artefact; the message says why in one line."""

    code = "artefact_error"


MIME = {
    "png": "image/png",
    "pdf": "application/pdf",
    "docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    "pptx": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
}


def file_name(title: str, ext: str, fallback: str) -> str:
    """A safe file name from a title: "Q3 Sales / EU" -> "q3-sales-eu.png"."""
    stem = re.sub(r"[^\w]+", "-", title.lower(), flags=re.UNICODE).strip("-_")[:60].strip("-_")
    return f"{stem or fallback}.{ext}"
