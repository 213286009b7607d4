"""Background tasks and reminders: the rows the scheduler's task runner claims and finishes.

Revision ID: 0010
Revises: 0009
"""
from alembic import op
import sqlalchemy as sa

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tasks",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.Text, nullable=False, server_default="task"),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("goal", sa.Text, nullable=False),
        sa.Column("repeat", sa.Text, nullable=True),
        sa.Column("status", sa.Text, nullable=False, server_default="scheduled"),
        sa.Column("next_run", sa.Float, nullable=True),
        sa.Column("runs", sa.Integer, nullable=False, server_default="0"),
        sa.Column("notes", sa.Text, nullable=False, server_default=""),
        sa.Column("result", sa.Text, nullable=True),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("conversation_id", sa.Text, nullable=True),
        sa.Column("claimed_by", sa.Text, nullable=True),
        sa.Column("claimed_at", sa.Float, nullable=True),
        sa.Column("created", sa.Float, nullable=False),
        sa.Column("updated", sa.Float, nullable=False),
    )
    op.create_index("ix_tasks_due", "tasks", ["status", "next_run"])


def downgrade() -> None:
    op.drop_index("ix_tasks_due", table_name="tasks")
    op.drop_table("tasks")
