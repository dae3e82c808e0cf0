"""Code and SQL the migrations run, frozen: ``mNNNN.py`` is what revision NNNN's migration needs
(its backfill's Python, SQL that a later migration also reads), as it ran when that revision
was written. No later change edits these modules, as no later change edits the frozen view
SQL under db/migrations/views/: the live code (db/writer/, collectors/) may change, and
upgrading through an old revision must still do what that revision did.

A migration imports only these modules and db.migrations.views (beside the stdlib,
SQLAlchemy, Alembic, psycopg, orjson); never live code, and never another migration
(tests/unit/test_layout.py checks both).
"""
