"""Alembic environment: always driven programmatically with a live connection (see migrate.py)."""

from alembic import context

from actors.store.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
