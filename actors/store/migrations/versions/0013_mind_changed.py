"""Memory rows say when they last changed, so a process keeps every active item current with
one small read per prompt instead of reading them all (issue 20, actors/memory/live.py).

Revision ID: 0013
Revises: 0012
"""
import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("mind", sa.Column("changed", sa.Float, nullable=True))
    op.create_index("ix_mind_changed", "mind", ["changed"])


def downgrade() -> None:
    op.drop_index("ix_mind_changed", "mind")
    op.drop_column("mind", "changed")
