"""Notifications and calls (issue 15): Web Push subscriptions, the calls state machine, one row
per delivery attempt, and the outbox's delivery state.

Revision ID: 0012
Revises: 0011
"""
import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "push_subscriptions",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("person_id", sa.Integer, nullable=False, server_default="1"),
        sa.Column("endpoint", sa.Text, nullable=False, unique=True),
        sa.Column("p256dh", sa.Text, nullable=False),
        sa.Column("auth", sa.Text, nullable=False),
        sa.Column("created", sa.Float, nullable=False),
        sa.Column("last_ok", sa.Float, nullable=True),
    )
    op.create_table(
        "calls",
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
    )
    op.create_index("ix_calls_due", "calls", ["status", "at"])
    op.create_table(
        "notify_attempts",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("ts", sa.Float, nullable=False),
        sa.Column("outbox_id", sa.Integer, nullable=True),
        sa.Column("call_id", sa.Integer, nullable=True),
        sa.Column("channel", sa.Text, nullable=False),
        sa.Column("target", sa.Text, nullable=True),
        sa.Column("ok", sa.Boolean, nullable=False),
        sa.Column("status_code", sa.Integer, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
    )
    op.create_index("ix_notify_attempts_outbox", "notify_attempts", ["outbox_id"])
    op.add_column("outbox", sa.Column("attempts", sa.Integer, nullable=False, server_default="0"))
    op.add_column("outbox", sa.Column("next_try", sa.Float, nullable=True))
    op.add_column("outbox", sa.Column("reason", sa.Text, nullable=True))
    # Per channel: "sent", or the last error while it is still being retried.
    op.add_column("outbox", sa.Column("channels", sa.JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("channels")
        batch.drop_column("reason")
        batch.drop_column("next_try")
        batch.drop_column("attempts")
    op.drop_index("ix_notify_attempts_outbox", "notify_attempts")
    op.drop_table("notify_attempts")
    op.drop_index("ix_calls_due", "calls")
    op.drop_table("calls")
    op.drop_table("push_subscriptions")
