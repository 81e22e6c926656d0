"""Run persistence: the :class:`RunStore` boundary, SQLite and in-memory implementations."""

from .base import JournalRow, RunRecord, RunStore, StoreError
from .memory import MemoryStore
from .sqlite import SqliteStore, default_home

__all__ = ["JournalRow", "MemoryStore", "RunRecord", "RunStore", "SqliteStore", "StoreError", "default_home"]
