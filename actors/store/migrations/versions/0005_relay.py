"""The agent-to-agent relay: sessions (tombstones after purge), their logs and their files.

Revision ID: 0005
Revises: 0004
"""
from alembic import op
import sqlalchemy as sa

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "relay_sessions",
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
    )
    op.create_table(
        "relay_messages",
        sa.Column("uid", sa.Text, sa.ForeignKey("relay_sessions.uid", ondelete="CASCADE"), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("urgent", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("envelope", sa.Text, nullable=False),
    )
    op.create_index("ix_relay_messages_urgent", "relay_messages", ["uid", "urgent", "seq"])
    op.create_table(
        "relay_files",
        sa.Column("uid", sa.Text, sa.ForeignKey("relay_sessions.uid", ondelete="CASCADE"), primary_key=True),
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("size", sa.BigInteger, nullable=False),
        sa.Column("content_type", sa.Text, nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("uploaded_at", sa.Text, nullable=False),
        sa.Column("path", sa.Text, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("relay_files")
    op.drop_table("relay_messages")
    op.drop_table("relay_sessions")
