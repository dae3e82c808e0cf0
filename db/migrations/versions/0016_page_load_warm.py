"""Warm-origin page loads (experiment 4) in ``v_page_load``: two columns at the end,
so the existing columns keep their positions (``CREATE OR REPLACE VIEW`` may only append):

- ``warm_origin``: the record is the measured load of a warm origin (its body has a
  ``warm_origin`` object); false for a cold load, whether the body has no such key or null.
- ``request_in_0rtt``: body.warm_origin.zero_rtt.request_in_0rtt, Chromium's netlog evidence
  that the page request went out as QUIC early data; NULL when not known (cold load, no QUIC
  session to the origin).

Revision ID: 0016_page_load_warm
Revises: 0015_query_speed
"""

from alembic import op

from db.migrations.views import create_view, restore_view

revision = "0016_page_load_warm"
down_revision = "0015_query_speed"
branch_labels = None
depends_on = None


def upgrade() -> None:
    create_view(op, revision, "v_page_load")  # CREATE OR REPLACE: columns appended


def downgrade() -> None:
    restore_view(op, "0015_query_speed", "v_page_load")
