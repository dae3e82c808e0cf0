"""Bounds that a command shows as an option's default in --help. They live apart from the
modules that enforce them (the planner needs pydantic and the spec models), so that building
the CLI's help imports none of those."""

from __future__ import annotations

MAX_UNITS = 1_000_000  # default bound of a plan's size (units); `--max-units` raises it
