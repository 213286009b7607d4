"""Relay messages keep the server's id of the post that made them, so a post sent again after
its session's actor died at the instant of commit is answered from the store, not stored twice
(issue 19).

Revision ID: 0014
Revises: 0013
"""
import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("relay_messages", sa.Column("post_token", sa.Text, nullable=True))
    op.create_index("ux_relay_messages_post_token", "relay_messages", ["uid", "post_token"], unique=True)


def downgrade() -> None:
    op.drop_index("ux_relay_messages_post_token", "relay_messages")
    op.drop_column("relay_messages", "post_token")
