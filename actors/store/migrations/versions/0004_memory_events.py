"""Memory events: what reflection, dedup, updates and prompt selection did, for the notebooks.

Revision ID: 0004
Revises: 0003
"""
from alembic import op
import sqlalchemy as sa

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "memory_events",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("ts", sa.Float, nullable=False),
        sa.Column("event", sa.Text, nullable=False),
        sa.Column("item_id", sa.Integer, nullable=True),
        sa.Column("session_id", sa.Text, nullable=True),
        sa.Column("data", sa.JSON, nullable=True),
    )
    op.create_index("ix_memory_events_event_ts", "memory_events", ["event", "ts"])


def downgrade() -> None:
    op.drop_table("memory_events")
