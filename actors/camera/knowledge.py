"""Knowledge excerpts for the vision model: the passages of the owner's uploaded documents that
best match the question, goal and step (up to three, 380 characters each).

Lexical, like memory's relevance term: cheap, predictable, and good enough for manuals whose
wording the owner's questions tend to echo.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence

import sqlalchemy as sa

from actors.common.text import word_set
from actors.common.attachments import extract_text
from actors.store import schema
from actors.store.store import Store
from vision.vlm import CAP_EXCERPT, MAX_EXCERPTS

MAX_DOCUMENTS = 30
MAX_DOCUMENT_BYTES = 2_000_000
TEXT_MIMES = ("text/", "application/json", "application/pdf")


def passages(text: str, size: int = CAP_EXCERPT) -> list[str]:
    """The text cut into passages of about `size` characters at sentence or word breaks."""
    words = text.split()
    out: list[str] = []
    current: list[str] = []
    length = 0
    for word in words:
        if length + len(word) + 1 > size and current:
            out.append(" ".join(current))
            current, length = [], 0
        current.append(word)
        length += len(word) + 1
    if current:
        out.append(" ".join(current))
    return out


def best_excerpts(documents: Sequence[tuple[str, str]], query: str, n: int = MAX_EXCERPTS) -> list[str]:
    """The `n` passages sharing most words with `query` (normalised by passage length), each
    prefixed with its document's name; none when nothing shares a word."""
    query_words = word_set(query)
    if not query_words:
        return []
    scored: list[tuple[float, int, str]] = []
    order = 0
    for name, text in documents:
        for passage in passages(text, CAP_EXCERPT - len(name) - 3):
            words = word_set(passage)
            overlap = len(query_words & words)
            if overlap:
                scored.append((overlap / math.sqrt(len(words) + 1), order, f"{name}: {passage}"))
            order += 1
    scored.sort(key=lambda s: (-s[0], s[1]))
    return [text for _, _, text in scored[:n]]


async def load_documents(store: Store) -> list[tuple[str, str]]:
    """The owner's recent text-like uploads as (name, text)."""
    query = (sa.select(schema.files.c.id, schema.files.c.name, schema.files.c.mime)
             .where(sa.or_(*[schema.files.c.mime.startswith(m) for m in TEXT_MIMES]))
             .where(schema.files.c.size <= MAX_DOCUMENT_BYTES)
             .order_by(schema.files.c.id.desc()).limit(MAX_DOCUMENTS))
    async with store.engine.connect() as conn:
        rows = (await conn.execute(query)).all()
    documents = []
    for file_id, name, mime in rows:
        found = await store.get_file(file_id)
        if found is not None:
            text = await asyncio.to_thread(extract_text, found[1], mime, name)
            if text.strip():
                documents.append((name, text))
    return documents
