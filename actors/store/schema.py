"""The one schema shared by PostgreSQL and SQLite (SQLAlchemy Core).

Alembic migrations create these tables; this module is what the code queries against.
Timestamps are epoch seconds (REAL), as the spec's tables use.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

conversations = sa.Table(
    "conversations", metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("title", sa.Text, nullable=False, server_default=""),
    sa.Column("channel", sa.Text, nullable=False, server_default="chat"),
    # Rolling summary of the messages that fell out of the verbatim history window.
    sa.Column("summary", sa.Text, nullable=False, server_default=""),
    sa.Column("summary_upto", sa.Integer, nullable=False, server_default="0"),
    sa.Column("created", sa.Float, nullable=False),
    sa.Column("updated", sa.Float, nullable=False),
)

messages = sa.Table(
    "messages", metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("conversation_id", sa.Text,
              sa.ForeignKey("conversations.id", ondelete="CASCADE"), nullable=False),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("role", sa.Text, nullable=False),
    sa.Column("content", sa.Text, nullable=False),
    sa.Column("meta", sa.JSON, nullable=True),
    sa.Column("created", sa.Float, nullable=False),
    sa.UniqueConstraint("conversation_id", "seq", name="uq_messages_conversation_seq"),
)

files = sa.Table(
    "files", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("conversation_id", sa.Text, nullable=True),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("mime", sa.Text, nullable=False),
    sa.Column("size", sa.Integer, nullable=False),
    sa.Column("sha256", sa.Text, nullable=False),
    # Bytes as base64 text, as the spec stores them; portable across both backends.
    sa.Column("data", sa.Text, nullable=False),
    sa.Column("created", sa.Float, nullable=False),
)

audit_log = sa.Table(
    "audit_log", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("ts", sa.Float, nullable=False),
    sa.Column("session_id", sa.Text, nullable=True),
    sa.Column("tool", sa.Text, nullable=False),
    sa.Column("arguments", sa.JSON, nullable=True),
    sa.Column("tier", sa.Text, nullable=False),
    sa.Column("confirmed", sa.Boolean, nullable=True),
    sa.Column("result", sa.Text, nullable=True),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("duration_ms", sa.Float, nullable=False),
)

kv = sa.Table(
    "kv", metadata,
    sa.Column("key", sa.Text, primary_key=True),
    sa.Column("value", sa.JSON, nullable=True),
    sa.Column("updated", sa.Float, nullable=False),
)

outbox = sa.Table(
    "outbox", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("ts", sa.Float, nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("session_id", sa.Text, nullable=True),
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("data", sa.JSON, nullable=True),
    sa.Column("status", sa.Text, nullable=False, server_default="queued"),
    sa.Column("delivered_at", sa.Float, nullable=True),
)

mind = sa.Table(
    "mind", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("importance", sa.Float, nullable=False),
    sa.Column("uses", sa.Integer, nullable=False, server_default="0"),
    sa.Column("active", sa.Boolean, nullable=False, server_default=sa.true()),
    sa.Column("created", sa.Float, nullable=False),
    sa.Column("last_used", sa.Float, nullable=True),
)
