"""The one schema shared by PostgreSQL and SQLite (SQLAlchemy Core).

Alembic migrations create these tables; this module is what the code queries against.
Timestamps are epoch seconds (REAL), as the spec's tables use.
"""

from __future__ import annotations

import time

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
    # Untrusted sources the rolling summary was folded from (migration 0011); [] = clean.
    sa.Column("summary_sources", sa.JSON, nullable=True),
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
    # Whether the turn had read anything untrusted when the call was decided, and what (0011).
    sa.Column("tainted", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("sources", sa.JSON, nullable=True),
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
    # Delivery (0012, actors/notify): tries so far, when the next is due, why it failed, and
    # each channel's state ("sent" or its last error).
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Column("next_try", sa.Float, nullable=True),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("channels", sa.JSON, nullable=True),
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
    # What produced the item (0011): NULL for the owner's own words, else its untrusted sources
    # ("file:12 notes.txt; web:example.com"): such an item is quoted as data, never a rule.
    sa.Column("provenance", sa.Text, nullable=True),
    # When the row last changed (0013), stamped by every SQLAlchemy insert and update, so a
    # process keeps all active items current by reading only what changed (actors/memory/live.py).
    sa.Column("changed", sa.Float, nullable=True, default=time.time, onupdate=time.time, index=True),
)

# One row per thing memory did (insert, reinforce, update, deactivate, mood, selection,
# reflection, playbook, consolidation, persona); the owner's notebooks read it.
memory_events = sa.Table(
    "memory_events", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("ts", sa.Float, nullable=False),
    sa.Column("event", sa.Text, nullable=False),
    sa.Column("item_id", sa.Integer, nullable=True),
    sa.Column("session_id", sa.Text, nullable=True),
    sa.Column("data", sa.JSON, nullable=True),
)

# The agent-to-agent relay: one row per session (a tombstone once purged), its log, its files.
relay_sessions = sa.Table(
    "relay_sessions", metadata,
    sa.Column("uid", sa.Text, primary_key=True),
    sa.Column("key_hash", sa.Text, nullable=False),
    sa.Column("created", sa.Float, nullable=False),
    sa.Column("last_write", sa.Float, nullable=False),
    sa.Column("terminated_at", sa.Float, nullable=True),
    sa.Column("purged", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Column("last_seq", sa.Integer, nullable=False, server_default="0"),
    sa.Column("message_count", sa.Integer, nullable=False, server_default="0"),
    sa.Column("storage_bytes", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("warned", sa.JSON, nullable=True),
    sa.Column("expiring_warned_for", sa.Float, nullable=True),
    sa.Column("limits", sa.JSON, nullable=False),
    # The creating client's address, for the sessions-an-hour cap.
    sa.Column("created_by", sa.Text, nullable=True),
    sa.Index("ix_relay_sessions_created_by", "created_by", "created"),
)

relay_messages = sa.Table(
    "relay_messages", metadata,
    sa.Column("uid", sa.Text, sa.ForeignKey("relay_sessions.uid", ondelete="CASCADE"), primary_key=True),
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("urgent", sa.Boolean, nullable=False, server_default=sa.false()),
    # The stamped envelope as sent, so clients get back exactly what was posted.
    sa.Column("envelope", sa.Text, nullable=False),
    # The server's own id for a client's post (never sent): a post made again after its actor
    # died at the instant of commit is found here instead of being stored twice.
    sa.Column("post_token", sa.Text, nullable=True),
    sa.Index("ux_relay_messages_post_token", "uid", "post_token", unique=True),
)

relay_files = sa.Table(
    "relay_files", metadata,
    sa.Column("uid", sa.Text, sa.ForeignKey("relay_sessions.uid", ondelete="CASCADE"), primary_key=True),
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("size", sa.BigInteger, nullable=False),
    sa.Column("content_type", sa.Text, nullable=False),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("uploaded_at", sa.Text, nullable=False),
    sa.Column("path", sa.Text, nullable=False),
)

# Sentence vectors of memory items (actors.memory.vectors). `model` names the weights that made
# the vector and `text_hash` the text it was made from, so a new model or an edited item is
# re-encoded rather than matched with a stale vector. float32 bytes, `dim` of them.
mind_vectors = sa.Table(
    "mind_vectors", metadata,
    sa.Column("item_id", sa.Integer, sa.ForeignKey("mind.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("model", sa.Text, nullable=False),
    sa.Column("dim", sa.Integer, nullable=False),
    sa.Column("text_hash", sa.Text, nullable=False),
    sa.Column("vector", sa.LargeBinary, nullable=False),
)

# People and their devices (actors/devices). The owner is person 1, made by migration 0007;
# the owner's PIN stays in kv (`owner_pin_hash`) where the turn pipeline reads it.
people = sa.Table(
    "people", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("email", sa.Text, nullable=True, unique=True),
    sa.Column("role", sa.Text, nullable=False),
    sa.Column("password_hash", sa.Text, nullable=True),
    sa.Column("pin_hash", sa.Text, nullable=True),
    sa.Column("created", sa.Float, nullable=False),
)

# Web sign-in sessions; only the token's SHA-256 is kept.
person_sessions = sa.Table(
    "person_sessions", metadata,
    sa.Column("token_hash", sa.Text, primary_key=True),
    sa.Column("person_id", sa.Integer, sa.ForeignKey("people.id", ondelete="CASCADE"), nullable=False),
    sa.Column("created", sa.Float, nullable=False),
    sa.Column("expires", sa.Float, nullable=False),
)

pairing_codes = sa.Table(
    "pairing_codes", metadata,
    sa.Column("code_hash", sa.Text, primary_key=True),
    sa.Column("person_id", sa.Integer, sa.ForeignKey("people.id", ondelete="CASCADE"), nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("label", sa.Text, nullable=False),
    sa.Column("skills", sa.JSON, nullable=False),
    sa.Column("uses_left", sa.Integer, nullable=False),
    sa.Column("expires", sa.Float, nullable=False),
    sa.Column("created", sa.Float, nullable=False),
)

devices = sa.Table(
    "devices", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("person_id", sa.Integer, sa.ForeignKey("people.id", ondelete="CASCADE"), nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("label", sa.Text, nullable=False),
    sa.Column("token_hash", sa.Text, nullable=False, unique=True),
    # Skills switched on (the grant) and the skills the device last reported in a hello.
    sa.Column("skills", sa.JSON, nullable=False),
    sa.Column("reported", sa.JSON, nullable=False),
    sa.Column("created", sa.Float, nullable=False),
    sa.Column("last_seen", sa.Float, nullable=True),
    sa.Column("revoked", sa.Float, nullable=True),
)

# Wrong pairing codes by address, for the 5-in-15-minutes rule (shared by every replica).
pair_failures = sa.Table(
    "pair_failures", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("address", sa.Text, nullable=False, index=True),
    sa.Column("ts", sa.Float, nullable=False),
)

device_events = sa.Table(
    "device_events", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("person_id", sa.Integer, sa.ForeignKey("people.id", ondelete="CASCADE"), nullable=False, index=True),
    sa.Column("device_id", sa.Integer, nullable=True),
    sa.Column("event", sa.Text, nullable=False),
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("data", sa.JSON, nullable=True),
    sa.Column("ts", sa.Float, nullable=False),
)

# Whose conversation it is when not the owner's, and the device that asked last (`here`).
conversation_people = sa.Table(
    "conversation_people", metadata,
    sa.Column("conversation_id", sa.Text, primary_key=True),
    sa.Column("person_id", sa.Integer, sa.ForeignKey("people.id", ondelete="CASCADE"), nullable=False),
    sa.Column("device_id", sa.Integer, nullable=True),
)

# Operator actions worth a record: people added, long-lived codes made, devices revoked.
change_log = sa.Table(
    "change_log", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("ts", sa.Float, nullable=False),
    sa.Column("actor", sa.Text, nullable=False),
    sa.Column("action", sa.Text, nullable=False),
    sa.Column("detail", sa.JSON, nullable=True),
)

# Camera procedures (actors/camera/procedures.py): the validated ProcedureCreate as JSON.
procedures = sa.Table(
    "procedures", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("body", sa.JSON, nullable=False),
    sa.Column("created", sa.Float, nullable=False),
)

# Background tasks and one-off reminders (actors/scheduler/tasks.py). What is due is decided here,
# not in a runner's memory: a runner claims a row (`claimed_by`, `claimed_at`) and finishes it only
# while the claim is still its own. `repeat` is a cron expression or an interval ("every 30m").
tasks = sa.Table(
    "tasks", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    # "task" runs as a background turn; "reminder" only queues its notification when due.
    sa.Column("kind", sa.Text, nullable=False, server_default="task"),
    sa.Column("title", sa.Text, nullable=False),
    sa.Column("goal", sa.Text, nullable=False),
    sa.Column("repeat", sa.Text, nullable=True),
    sa.Column("status", sa.Text, nullable=False, server_default="scheduled"),
    sa.Column("next_run", sa.Float, nullable=True),
    # Sessions used by the current run (reset when a repeating task comes round again).
    sa.Column("runs", sa.Integer, nullable=False, server_default="0"),
    sa.Column("notes", sa.Text, nullable=False, server_default=""),
    sa.Column("result", sa.Text, nullable=True),
    sa.Column("error", sa.Text, nullable=True),
    # The task's own conversation (channel "task"), which the owner can open.
    sa.Column("conversation_id", sa.Text, nullable=True),
    sa.Column("claimed_by", sa.Text, nullable=True),
    sa.Column("claimed_at", sa.Float, nullable=True),
    sa.Column("created", sa.Float, nullable=False),
    sa.Column("updated", sa.Float, nullable=False),
    sa.Index("ix_tasks_due", "status", "next_run"),
)

# Notifications and calls (actors/notify, migration 0012). Web Push subscriptions of a browser
# (its PushSubscription JSON); a push service answering 404 or 410 deletes the row.
push_subscriptions = sa.Table(
    "push_subscriptions", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("person_id", sa.Integer, nullable=False, server_default="1"),
    sa.Column("endpoint", sa.Text, nullable=False, unique=True),
    sa.Column("p256dh", sa.Text, nullable=False),
    sa.Column("auth", sa.Text, nullable=False),
    sa.Column("created", sa.Float, nullable=False),
    sa.Column("last_ok", sa.Float, nullable=True),
)

# Calls (spec section 11): scheduled -> ringing -> answered | declined | missed | cancelled.
# `rings` counts how often it rang (a user alarm re-rings once); `ended` is when it stopped.
calls = sa.Table(
    "calls", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("at", sa.Float, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("opening", sa.Text, nullable=True),
    sa.Column("status", sa.Text, nullable=False, server_default="scheduled"),
    sa.Column("repeat", sa.Text, nullable=True),
    sa.Column("source", sa.Text, nullable=False, server_default="user"),
    sa.Column("created", sa.Float, nullable=False),
    sa.Column("rang", sa.Float, nullable=True),
    sa.Column("answered", sa.Float, nullable=True),
    sa.Column("ended", sa.Float, nullable=True),
    sa.Column("rings", sa.Integer, nullable=False, server_default="0"),
    sa.Column("conversation_id", sa.Text, nullable=True),
    sa.Column("updated", sa.Float, nullable=False),
    sa.Index("ix_calls_due", "status", "at"),
)

# One row per delivery attempt on one channel (an outbox row's or a call's).
notify_attempts = sa.Table(
    "notify_attempts", metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("ts", sa.Float, nullable=False),
    sa.Column("outbox_id", sa.Integer, nullable=True),
    sa.Column("call_id", sa.Integer, nullable=True),
    sa.Column("channel", sa.Text, nullable=False),
    sa.Column("target", sa.Text, nullable=True),
    sa.Column("ok", sa.Boolean, nullable=False),
    sa.Column("status_code", sa.Integer, nullable=True),
    sa.Column("error", sa.Text, nullable=True),
    sa.Index("ix_notify_attempts_outbox", "outbox_id"),
)
