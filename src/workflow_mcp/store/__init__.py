"""Run persistence: the :class:`RunStore` boundary, SQLite and in-memory implementations."""

from ._process import HEARTBEAT_S, LEASE_TTL_S
from .base import JournalRow, RunRecord, RunStore, StoreError
from .memory import MemoryStore
from .sqlite import SqliteStore, default_home

__all__ = [
    "HEARTBEAT_S",
    "LEASE_TTL_S",
    "JournalRow",
    "MemoryStore",
    "RunRecord",
    "RunStore",
    "SqliteStore",
    "StoreError",
    "default_home",
]
