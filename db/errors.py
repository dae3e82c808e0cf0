"""The store's errors, in a module that imports nothing: the CLI catches StoreError around
every command without loading the store's code for commands that never use it."""

from __future__ import annotations


class StoreError(RuntimeError):
    """The store cannot be used as configured or reached: one line saying what to do."""
