"""Who created each relay session (the client address), so the sessions-an-hour cap is
counted from the store and holds across restarts and replicas.

Revision ID: 0009
Revises: 0008
"""
from alembic import op
import sqlalchemy as sa

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("relay_sessions", sa.Column("created_by", sa.Text, nullable=True))
    op.create_index("ix_relay_sessions_created_by", "relay_sessions", ["created_by", "created"])


def downgrade() -> None:
    op.drop_index("ix_relay_sessions_created_by", table_name="relay_sessions")
    op.drop_column("relay_sessions", "created_by")
