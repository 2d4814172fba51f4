"""Alembic environment: always run on a connection the store hands over (no URL in an ini file)."""

from alembic import context

from cairn.store.schema import metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
)
with context.begin_transaction():
    context.run_migrations()
