"""People and personal devices: sign-in sessions, pairing codes, devices, events, change log.

Revision ID: 0007
Revises: 0006
"""
import time

from alembic import op
import sqlalchemy as sa

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    people = op.create_table(
        "people",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("email", sa.Text, nullable=True, unique=True),
        sa.Column("role", sa.Text, nullable=False),
        sa.Column("password_hash", sa.Text, nullable=True),
        sa.Column("pin_hash", sa.Text, nullable=True),
        sa.Column("created", sa.Float, nullable=False),
    )
    # The owner is the first person (id 1 on a fresh table); owner keys sign in as them.
    op.bulk_insert(people, [{"email": None, "role": "owner", "created": time.time()}])
    op.create_table(
        "person_sessions",
        sa.Column("token_hash", sa.Text, primary_key=True),
        sa.Column("person_id", sa.Integer, sa.ForeignKey("people.id", ondelete="CASCADE"), nullable=False),
        sa.Column("created", sa.Float, nullable=False),
        sa.Column("expires", sa.Float, nullable=False),
    )
    op.create_table(
        "pairing_codes",
        sa.Column("code_hash", sa.Text, primary_key=True),
        sa.Column("person_id", sa.Integer, sa.ForeignKey("people.id", ondelete="CASCADE"), nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("label", sa.Text, nullable=False),
        sa.Column("skills", sa.JSON, nullable=False),
        sa.Column("uses_left", sa.Integer, nullable=False),
        sa.Column("expires", sa.Float, nullable=False),
        sa.Column("created", sa.Float, nullable=False),
    )
    op.create_table(
        "devices",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("person_id", sa.Integer, sa.ForeignKey("people.id", ondelete="CASCADE"), nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("label", sa.Text, nullable=False),
        sa.Column("token_hash", sa.Text, nullable=False, unique=True),
        sa.Column("skills", sa.JSON, nullable=False),
        sa.Column("reported", sa.JSON, nullable=False),
        sa.Column("created", sa.Float, nullable=False),
        sa.Column("last_seen", sa.Float, nullable=True),
        sa.Column("revoked", sa.Float, nullable=True),
    )
    op.create_table(
        "pair_failures",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("address", sa.Text, nullable=False),
        sa.Column("ts", sa.Float, nullable=False),
    )
    op.create_index("ix_pair_failures_address", "pair_failures", ["address"])
    op.create_table(
        "device_events",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("person_id", sa.Integer, sa.ForeignKey("people.id", ondelete="CASCADE"), nullable=False),
        sa.Column("device_id", sa.Integer, nullable=True),
        sa.Column("event", sa.Text, nullable=False),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("data", sa.JSON, nullable=True),
        sa.Column("ts", sa.Float, nullable=False),
    )
    op.create_index("ix_device_events_person_id", "device_events", ["person_id"])
    op.create_table(
        "conversation_people",
        sa.Column("conversation_id", sa.Text, primary_key=True),
        sa.Column("person_id", sa.Integer, sa.ForeignKey("people.id", ondelete="CASCADE"), nullable=False),
        sa.Column("device_id", sa.Integer, nullable=True),
    )
    op.create_table(
        "change_log",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("ts", sa.Float, nullable=False),
        sa.Column("actor", sa.Text, nullable=False),
        sa.Column("action", sa.Text, nullable=False),
        sa.Column("detail", sa.JSON, nullable=True),
    )


def downgrade() -> None:
    for name in ("change_log", "conversation_people", "device_events", "pair_failures", "devices",
                 "pairing_codes", "person_sessions", "people"):
        op.drop_table(name)
