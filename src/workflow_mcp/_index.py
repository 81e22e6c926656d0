"""The live discovery index: what :func:`~workflow_mcp.definitions.discover.find_workflows` returns,
kept per directory and refreshed by a file watcher (``watchfiles``), so listing is instant and current.

Two guarantees, each from its own mechanism:

* **Current.** Every read compares a fingerprint of the discovery inputs
  (:func:`~workflow_mcp.definitions.discover.discovery_inputs`: each workflows directory's entries
  with their size, mtime and inode; the settings and plugin records) with the one the cached result
  was built from; on any difference it discovers again before answering. A file written a moment ago
  is never missed, whatever the watcher has seen yet.
* **Instant.** A watcher thread (one per index, started with the first read) rebuilds an entry as
  soon as one of its directories changes, so the next read finds it ready. Directories that do not
  exist yet are watched through their nearest existing parent; the watch set is renewed as they
  appear. Nothing is ever unavailable: a read with no entry (the first one after start-up) discovers
  in place.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import watchfiles

from .definitions.discover import Discovery, Reachable, discovery_inputs, find_workflows

__all__ = ["DiscoveryIndex"]

Fingerprint = tuple[tuple[str, Any], ...]


def _stat(path: str) -> tuple[int, int, int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino)


def fingerprint(paths: list[Path]) -> Fingerprint:
    """What a change to any of ``paths`` changes: a file's stat, a directory's entries and theirs."""
    out: list[tuple[str, Any]] = []
    for path in paths:
        p = str(path)
        top = _stat(p)
        if top is not None and os.path.isdir(p):
            try:
                names = sorted(os.listdir(p))
            except OSError:
                names = []
            out.append((p, (top, tuple((n, _stat(os.path.join(p, n))) for n in names))))
        else:
            out.append((p, top))
    return tuple(out)


@dataclass
class _Entry:
    cwd: str
    home: str | None
    reachable: Reachable | None
    inputs: list[Path]
    print_: Fingerprint
    discovery: Discovery


class DiscoveryIndex:
    """Cached discovery per ``(cwd, home, reachable)``, refreshed by a watcher (module docstring).

    ``discover`` is the discovery function (default :func:`find_workflows`); ``watch`` ``False`` keeps
    the fingerprint check and no thread. ``builds`` counts discoveries run (a test's window on caching).
    """

    def __init__(self, discover: Callable[..., Discovery] = find_workflows, *, watch: bool = True) -> None:
        self._discover = discover
        self._watch = watch
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._entries: dict[tuple[str, str | None, Any], _Entry] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._restart = threading.Event()
        self.builds = 0
        self.generation = 0  # bumped by every rebuild the watcher makes

    @staticmethod
    def _key(cwd: str, home: str | None, reachable: Reachable | None) -> tuple[str, str | None, Any]:
        owner = getattr(reachable, "__self__", None)  # a bound method is a new object on each access
        ident = (id(owner), getattr(reachable, "__name__", "")) if owner is not None else id(reachable)
        return (os.path.realpath(cwd), home, ident)

    def get(self, cwd: str, home: str | None = None, *, reachable: Reachable | None = None) -> Discovery:
        """Discovery from ``cwd`` as :func:`find_workflows` would return it now.

        Raises:
            WorkflowNotFoundError: ``cwd`` is not a directory.
            RealmError: the Node worker could not run.
        """
        key = self._key(cwd, home, reachable)
        with self._lock:
            entry = self._entries.get(key)
        if entry is not None and fingerprint(entry.inputs) == entry.print_:
            return entry.discovery
        entry = self._build(cwd, home, reachable)
        with self._lock:
            self._entries[key] = entry
            self._restart.set()
        self._ensure_watcher()
        return entry.discovery

    def _build(self, cwd: str, home: str | None, reachable: Reachable | None) -> _Entry:
        inputs = discovery_inputs(cwd, home)
        before = fingerprint(inputs)
        discovery = self._discover(cwd, home, reachable=reachable)
        self.builds += 1
        return _Entry(cwd, home, reachable, inputs, before, discovery)

    def wait_for_generation(self, after: int, timeout: float) -> bool:
        """Wait until a watcher rebuild made :attr:`generation` greater than ``after`` (bounded)."""
        with self._changed:
            return self._changed.wait_for(lambda: self.generation > after, timeout)

    # -- the watcher ----------------------------------------------------------------------------
    def _ensure_watcher(self) -> None:
        if not self._watch or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="workflow-index-watcher", daemon=True)
        self._thread.start()

    def _watch_set(self) -> list[str]:
        with self._lock:
            inputs = [p for e in self._entries.values() for p in e.inputs]
        out: set[str] = set()
        for path in inputs:
            probe = path if path.is_dir() else path.parent
            while not probe.is_dir() and probe != probe.parent:
                probe = probe.parent
            out.add(str(probe))
        return sorted(out)

    def _run(self) -> None:
        own_stop = self._stop
        while not own_stop.is_set():
            self._restart.clear()
            paths = self._watch_set()
            if not paths:
                self._restart.wait(1.0)
                continue

            def stopping() -> bool:
                return own_stop.is_set() or self._restart.is_set()

            first = True
            with contextlib.suppress(OSError, RuntimeError):
                for _changes in watchfiles.watch(
                    *paths,
                    recursive=False,
                    debounce=50,
                    step=20,
                    rust_timeout=200,
                    yield_on_timeout=True,
                    stop_event=_PollStop(stopping),
                    raise_interrupt=False,
                ):
                    if _changes:
                        self._refresh()
                        self._restart.set()  # a directory may have appeared: watch it directly
                    elif first:  # the watch is in place now: catch what changed while it was set up
                        self._refresh()
                        if self._watch_set() != paths:
                            self._restart.set()
                    first = False
                    if stopping():
                        break

    def _refresh(self) -> None:
        with self._lock:
            entries = list(self._entries.items())
        for key, entry in entries:
            if fingerprint(entry.inputs) == entry.print_:
                continue
            with contextlib.suppress(Exception):  # a failed rebuild leaves the read path to report it
                fresh = self._build(entry.cwd, entry.home, entry.reachable)
                with self._changed:
                    self._entries[key] = fresh
                    self.generation += 1
                    self._changed.notify_all()

    def close(self) -> None:
        """Stop the watcher (bounded); the cache stays, and the next read starts a new watcher."""
        stop, self._stop = self._stop, threading.Event()
        stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(timeout=5)


class _PollStop:
    """An ``is_set()`` view of a predicate, for ``watchfiles.watch(stop_event=…)``."""

    def __init__(self, predicate: Callable[[], bool]) -> None:
        self._predicate = predicate

    def is_set(self) -> bool:
        return self._predicate()
