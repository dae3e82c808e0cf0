"""The store: SQLAlchemy models, Alembic migrations, SQL views (the researchers' API), roles,
and the embedded Postgres that is the default."""
