"""Provenance: what produced each memory item, what the rolling summary was folded from, and
each audited action's taint and sources (issue 13: only the owner's own words steer an action).

Revision ID: 0011
Revises: 0010
"""
import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # NULL: the owner's own words (every item written before this migration was).
    op.add_column("mind", sa.Column("provenance", sa.Text, nullable=True))
    op.add_column("conversations", sa.Column("summary_sources", sa.JSON, nullable=True))
    op.add_column("audit_log", sa.Column("tainted", sa.Boolean, nullable=False, server_default=sa.false()))
    op.add_column("audit_log", sa.Column("sources", sa.JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("audit_log") as batch:
        batch.drop_column("sources")
        batch.drop_column("tainted")
    with op.batch_alter_table("conversations") as batch:
        batch.drop_column("summary_sources")
    with op.batch_alter_table("mind") as batch:
        batch.drop_column("provenance")
