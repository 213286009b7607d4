"""Memory embeddings: one cached sentence vector per `mind` item, for paraphrase-aware recall.

Revision ID: 0006
Revises: 0005
"""
from alembic import op
import sqlalchemy as sa

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "mind_vectors",
        sa.Column("item_id", sa.Integer, sa.ForeignKey("mind.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("model", sa.Text, nullable=False),
        sa.Column("dim", sa.Integer, nullable=False),
        sa.Column("text_hash", sa.Text, nullable=False),
        sa.Column("vector", sa.LargeBinary, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("mind_vectors")
