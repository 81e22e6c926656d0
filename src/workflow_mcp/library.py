"""The workflow library: create, version, tag, draft, describe, list and delete ``.js`` workflows.

Reached through :attr:`WorkflowService.library <workflow_mcp.service.WorkflowService.library>` only.
Rules (the library seed's powers, given to real Claude Code workflow files):

* **The file stays Claude's.** A created workflow is written as ``<slug>.js`` in the project's
  ``.claude/workflows`` (or the personal one) exactly as given, after the loader accepted it under the
  Claude profile; nothing is added to it. Catalog metadata (version, tags, category, author, free-form
  fields) lives in the sidecar (:class:`~workflow_mcp.store.base.LibraryStore`), keyed by directory,
  name and version, with the SHA-256 of the exact source it describes — a file edited by hand no longer
  matches its catalog entry and is listed without one.
* **Versions** are semantic versions (the ``semver`` library), stored in canonical form: surrounding
  whitespace, a leading ``v`` and build metadata are dropped (``v1.0.0+build.5`` is ``1.0.0``). A
  version that is not semver is refused (``invalid_version``) before any lookup. A name that already
  exists needs a version not stored yet; the previous version's source stays in the sidecar.
* **File names**: ``<slug>.js``, the slug being the name's ASCII letters and digits (accents folded)
  joined by ``-`` in lower case, ``workflow`` when none is left; when that file exists and holds another
  workflow (``Deploy`` and ``deploy``), ``<slug>-<first 8 hex of SHA-256 of the name>.js``.
* **Look-alike names** are refused (:data:`LOOK_ALIKE_RULE`): a name with an invisible or bidi-control
  character is ``invalid_input``; a name that only looks like one already in a workflows directory this
  library reads is ``already_exists``. Slugs that Windows reserves as device names (``con``, ``nul``…)
  take the hashed file name.
* **No link is followed after resolving**: files are written, read for a delete and removed through a
  descriptor of the workflows directory opened without following links (:mod:`workflow_mcp._safe_files`).
* **One writer at a time** (a lock file beside the state database, across processes), and the sidecar
  decides races anyway: of two creates of one ``name@version`` exactly one wins, the other gets
  ``already_exists``. The file is written atomically (a temporary file renamed over it); when writing
  fails the sidecar row is taken back, so nothing half-done remains.
* **Drafts** live only in the sidecar (invisible to Claude's discovery and to listings by default),
  one per name and directory, addressed by id or ``name@draft``; overwriting one keeps its creation
  date; an optional expiry; creating the workflow for real promotes (removes) its draft.
* **Delete** is two steps: :meth:`Library.prepare_delete` returns a single-use token (valid
  :data:`CONFIRM_TTL_S` seconds) naming the resolved target, :meth:`Library.confirm_delete` deletes
  only if that target is unchanged (``target_changed`` otherwise). Only files inside the workflows
  directories are ever removed; an emptied workflows directory is removed too.

Every refusal is a :class:`~workflow_mcp.errors.LibraryError` with a typed ``reason``.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import fcntl
import functools
import hashlib
import json
import os
import secrets
import threading
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import semver

from ._safe_files import RACED, opened_directory, read_file_in, remove_file_in, replace_file_in
from .definitions.discover import DiscoveredWorkflow
from .definitions.load import Workflow, load_workflow, validate_workflow
from .definitions.plugins import claude_config_dir
from .errors import (
    LibraryError,
    StoreCorruptError,
    StoreError,
    StoreFullError,
    StoreReadOnlyError,
    WorkflowMcpError,
)
from .store.base import DeleteConfirmation, LibraryDraft, LibraryStore, LibraryVersion

__all__ = [
    "CONFIRM_TTL_S",
    "LOOK_ALIKE_RULE",
    "RESERVED_SLUGS",
    "Created",
    "DeletePrompt",
    "Deleted",
    "Described",
    "DraftSaved",
    "Library",
    "ListedWorkflow",
    "Listing",
    "canonical_version",
    "look_alike",
    "parse_draft_ref",
    "slugify",
]

CONFIRM_TTL_S = 600.0
"""How long a delete confirmation token stays valid (10 minutes, the library seed's window)."""

MAX_NAME_CHARS = 200
"""Longest workflow name the library stores (the seed's limit, so every file name fits 255 bytes)."""

MAX_TAGS = 64
MAX_FIELDS_BYTES = 65_536
MAX_FIELD_CHARS = 255
DRAFT_SUFFIX = "@draft"

Scope = Literal["project", "personal"]


def canonical_version(text: str) -> str:
    """The canonical form of a semantic version: ``" v1.2.3-rc.1+build.5 "`` → ``"1.2.3-rc.1"``.

    Raises:
        LibraryError: ``invalid_version`` when ``text`` is not semver 2.0.0 (after trimming and a leading
            ``v``/``V``), e.g. ``1.0``, ``01.0.0`` or ``latest``.
    """
    trimmed = text.strip()
    bare = trimmed[1:] if trimmed[:1] in ("v", "V") else trimmed
    try:
        parsed = semver.Version.parse(bare)
    except (ValueError, TypeError):
        raise LibraryError(
            "invalid_version",
            f"version {text!r} is not a semantic version (MAJOR.MINOR.PATCH, e.g. 1.0.0 or 2.1.0-rc.1)",
        ) from None
    return str(parsed.replace(build=None))


def _precedence(version: str) -> semver.Version:
    return semver.Version.parse(version)


def slugify(name: str) -> str:
    """The file-name part for ``name``: ASCII letters and digits (accents folded, lower case) joined by
    ``-``, at most 64 characters; ``workflow`` when the name has none (``Рабочий процесс``)."""
    folded = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii").lower()
    words: list[str] = []
    current = ""
    for ch in folded:
        if ch.isalnum():
            current += ch
        elif current:
            words.append(current)
            current = ""
    if current:
        words.append(current)
    slug = "-".join(words)[:64].strip("-")
    return slug or "workflow"


#: Device names Windows reserves whatever the extension (``con.js`` cannot be created there), so a
#: library shared with Windows users never names a file so: their slugs take the hashed form.
RESERVED_SLUGS = frozenset(
    {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)), *(f"lpt{i}" for i in range(10))}
)

LOOK_ALIKE_RULE = (
    "look-alike rule: two names are one name when they are equal after Unicode NFKC normalisation "
    "(UAX #15: composed and decomposed accents, full-width letters, ligatures), or when they have the "
    "same length and every character in which they differ is non-ASCII and listed as confusable with the "
    "other (Unicode confusables, UTS #39)"
)


def _char(ch: str) -> str:
    """``U+200D ZERO WIDTH JOINER`` (the code point and its Unicode name, when it has one)."""
    label = unicodedata.name(ch, "")
    return f"U+{ord(ch):04X}" + (f" {label}" if label else "")


def _invisible(name: str) -> str | None:
    """The first character of ``name`` that shows nothing or reorders what follows: a control (Unicode
    category Cc), a format character (Cf: zero-width joiners, bidi embeddings, overrides and isolates,
    soft hyphens) or a line or paragraph separator; ``None`` when there is none."""
    return next((ch for ch in name if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp")), None)


@functools.lru_cache(maxsize=4096)
def _homoglyphs(ch: str) -> frozenset[str]:
    """The characters Unicode's confusables data lists as looking like ``ch``."""
    from confusable_homoglyphs import confusables  # 0.2 s to load its table: only for non-ASCII names

    found = confusables.is_confusable(ch, greedy=True)
    return frozenset(h["c"] for entry in found or () for h in entry["homoglyphs"])


def look_alike(name: str, other: str) -> str | None:
    """How ``name`` only looks like ``other`` (see :data:`LOOK_ALIKE_RULE`), or ``None`` when they are
    the same string or visibly different."""
    if name == other:
        return None
    mine, theirs = unicodedata.normalize("NFKC", name), unicodedata.normalize("NFKC", other)
    if mine == theirs:
        return "they are equal after Unicode NFKC normalisation"
    if len(mine) != len(theirs):
        return None
    pairs = [(a, b) for a, b in zip(mine, theirs, strict=True) if a != b]
    if all(a.isascii() and b.isascii() for a, b in pairs):
        return None
    if not all(b in _homoglyphs(a) or a in _homoglyphs(b) for a, b in pairs):
        return None
    a, b = next((a, b) for a, b in pairs if not (a.isascii() and b.isascii()))
    return f"{_char(a)} stands where the other has {_char(b)}, and Unicode lists them as confusable"


def parse_draft_ref(ref: str) -> str | None:
    """The name in ``"<name>@draft"`` (``None`` when ``ref`` does not end so)."""
    if ref.endswith(DRAFT_SUFFIX) and len(ref) > len(DRAFT_SUFFIX):
        return ref[: -len(DRAFT_SUFFIX)]
    return None


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _confirmation_hash(token: str, holder: str) -> str:
    """How a delete confirmation is stored: the token's SHA-256, bound to the holder it was given to
    (the local user's, ``""``, is the token's plain hash)."""
    return _sha256(token if not holder else f"{holder}\n{token}")


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _seconds(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def _clean(value: str | None, what: str, *, limit: int = MAX_FIELD_CHARS) -> str | None:
    """``value`` trimmed; ``None`` stays ``None``. A blank or too long value is ``invalid_input``."""
    if value is None:
        return None
    trimmed = value.strip()
    if not trimmed:
        raise LibraryError("invalid_input", f"{what} is blank; omit it or give visible text")
    if len(trimmed) > limit:
        raise LibraryError("invalid_input", f"{what} is longer than {limit} characters")
    return trimmed


def _clean_tags(tags: Iterable[str]) -> tuple[str, ...]:
    out: list[str] = []
    for tag in tags:
        if not isinstance(tag, str):
            raise LibraryError("invalid_input", f"tag {tag!r} is not a string")
        cleaned = _clean(tag, "a tag", limit=64)
        assert cleaned is not None
        if cleaned.casefold() not in {t.casefold() for t in out}:
            out.append(cleaned)
    if len(out) > MAX_TAGS:
        raise LibraryError("invalid_input", f"{len(out)} tags; at most {MAX_TAGS} are kept per workflow")
    return tuple(out)


def _clean_fields(fields: Mapping[str, Any] | None) -> dict[str, Any]:
    """Free-form metadata: a JSON object (at most 64 KiB encoded), else ``invalid_input``."""
    extra = dict(fields or {})
    try:
        encoded = json.dumps(extra, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise LibraryError("invalid_input", f"fields must be a JSON object ({exc})") from None
    if len(encoded.encode("utf-8")) > MAX_FIELDS_BYTES:
        raise LibraryError("invalid_input", f"fields are larger than {MAX_FIELDS_BYTES:,} bytes as JSON")
    return extra


def _write_failed(exc: OSError, what: str) -> LibraryError:
    """``write_failed`` naming the error code and its description only (no absolute path)."""
    code = errno.errorcode.get(exc.errno or 0, "EIO")
    why = f"{what} failed: {code} ({os.strerror(exc.errno or errno.EIO)})"
    if exc.errno in RACED:
        why += (
            "; a directory on the way to the workflows directory is a symbolic link or not a directory "
            "(it may have been swapped while writing): the library writes only into the directory it "
            "resolved, never through a link, so nothing was written"
        )
    return LibraryError("write_failed", why)


def _store_failed(exc: StoreError, what: str) -> LibraryError:
    """``write_failed`` saying why the state database refused (never its path)."""
    if isinstance(exc, StoreFullError):
        why = "the disk holding the state database is full (or the file-size limit was reached)"
    elif isinstance(exc, StoreReadOnlyError):
        why = "the state database is read-only"
    elif isinstance(exc, StoreCorruptError):
        why = "the state database is damaged; run `workflow-mcp store check`"
    else:
        why = "the state database refused it"
    return LibraryError("write_failed", f"{what} failed: {why}; nothing was changed")


# -- results ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Created:
    """A workflow written by :meth:`Library.create`: its catalog entry, where it lives (``file``
    relative to the project directory, or ``~``-relative for personal), and the draft it promoted."""

    entry: LibraryVersion
    scope: Scope
    file: str
    previous_version: str | None = None
    promoted_draft: str | None = None


@dataclass(frozen=True)
class DraftSaved:
    """A draft stored by :meth:`Library.create_draft`; ``status`` ``created`` or ``overwritten``."""

    draft: LibraryDraft
    status: Literal["created", "overwritten"]


@dataclass(frozen=True)
class Described:
    """One workflow (or draft) as :meth:`Library.describe` returns it.

    ``kind``: ``permanent`` (a file in a workflows directory, or a stored earlier version of one) or
    ``draft``. ``version`` ``None``: a hand-written file with no catalog entry. ``current``: this is the
    source in the file now. ``versions``: every stored version, highest precedence first.
    ``global_instructions``: the configured Markdown, ``None`` when there is no such file.
    """

    name: str
    kind: Literal["permanent", "draft"]
    source: str
    source_hash: str
    version: str | None
    current: bool
    scope: Scope | None
    file: str | None
    tags: tuple[str, ...]
    category: str | None
    author: str | None
    fields: dict[str, Any]
    versions: tuple[str, ...]
    global_instructions: str | None
    draft_id: str | None = None
    created_at: str | None = None
    expires_at: str | None = None


@dataclass(frozen=True)
class ListedWorkflow:
    """One row of :meth:`Library.list`: a visible workflow (or a draft) with its catalog metadata."""

    name: str
    description: str
    kind: Literal["permanent", "draft"]
    version: str | None
    tags: tuple[str, ...]
    category: str | None
    author: str | None
    source: Literal["personal", "project", "plugin"]
    path: str | None
    draft_id: str | None = None
    versions: tuple[str, ...] = ()
    """Every stored version of this name in its directory, highest semver precedence first."""


@dataclass(frozen=True)
class Listing:
    """What :meth:`Library.list` found, the filters it applied (trimmed; blank ones dropped) and, when
    nothing matched, a hint to broaden them."""

    workflows: tuple[ListedWorkflow, ...]
    filters: dict[str, Any]
    hint: str | None = None


@dataclass(frozen=True)
class DeletePrompt:
    """The confirmation :meth:`Library.prepare_delete` asks for: pass ``token`` to
    :meth:`Library.confirm_delete` within :data:`CONFIRM_TTL_S` seconds (``expires_at``, ISO-8601 UTC)."""

    token: str
    name: str
    kind: Literal["permanent", "draft"]
    version: str | None
    file: str | None
    removes_file: bool
    expires_at: str
    source_hash: str = ""

    @property
    def message(self) -> str:
        """The question to put to the user."""
        what = f"{self.name}@{self.version}" if self.version else self.name
        if self.kind == "draft":
            return (
                f"Delete the draft of {self.name!r}? It is kept only in the library; this cannot be undone."
            )
        where = f" and its file {self.file}" if self.removes_file else " (its stored source; the file stays)"
        return f"Delete workflow {what}{where}? This cannot be undone."


@dataclass(frozen=True)
class Deleted:
    """What :meth:`Library.confirm_delete` removed."""

    name: str
    kind: Literal["permanent", "draft"]
    version: str | None
    file: str | None
    removed_file: bool
    removed_directory: bool = False


@dataclass
class _Found:
    """A workflow file of one name in one workflows directory."""

    root: str
    scope: Scope
    file: str
    name: str
    source: str
    source_hash: str


@dataclass
class _Target:
    root: str
    scope: Scope | None
    name: str
    source_hash: str
    version: str | None = None
    draft_id: str | None = None
    file: str | None = None


# -- the library --------------------------------------------------------------------------------
class Library:
    """The library of the workflows visible from ``cwd`` (see the module docstring for its rules).

    ``store`` is the sidecar; ``home`` as for discovery (``None``: ``$CLAUDE_CONFIG_DIR`` or
    ``~/.claude``); ``lock_path`` a file that serialises writers across processes (``None``: this
    process only); ``instructions`` the Markdown files tried in order for the global instructions;
    ``clock`` returns Unix seconds (confirmation and draft expiry).
    """

    def __init__(
        self,
        store: LibraryStore,
        *,
        cwd: str,
        home: str | None = None,
        lock_path: str | None = None,
        instructions: Sequence[str] = (),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.cwd = cwd
        self.home = home
        self.lock_path = lock_path
        self.instructions = tuple(instructions)
        self.clock = clock
        self.reachable: Callable[[str], bool] | None = None
        self._lock = threading.Lock()

    def within(self, reachable: Callable[[str], bool]) -> Library:
        """This library limited to the workflows directories ``reachable`` allows (a predicate on real
        paths, e.g. an MCP server's file scope: over HTTP the personal directory is out of reach, so it
        is neither read nor written). Same store, same lock."""
        view = copy.copy(self)
        view.reachable = reachable
        return view

    def _scopes(
        self, cwd: str | None, only: tuple[Scope, ...] = ("project", "personal")
    ) -> list[tuple[Scope, str]]:
        """``(scope, root)`` of the directories this library may read, project first."""
        roots = [(scope, self.root_of(scope, cwd)) for scope in only]
        return [(s, r) for s, r in roots if self.reachable is None or self.reachable(r)]

    def _writable_root(self, personal: bool, cwd: str | None) -> str:
        scope: Scope = "personal" if personal else "project"
        found = self._scopes(cwd, (scope,))
        if not found:
            raise LibraryError(
                "invalid_input",
                f"the {scope} workflows directory is out of this server's reach (over HTTP only the project "
                "roots are); omit personal",
            )
        return found[0][1]

    # -- places --------------------------------------------------------------------------------
    def root_of(self, scope: Scope, cwd: str | None = None) -> str:
        """The real path of the workflows directory of ``scope`` (it may not exist yet)."""
        if scope == "personal":
            return os.path.realpath(claude_config_dir(self.home) / "workflows")
        return os.path.realpath(Path(cwd or self.cwd, ".claude", "workflows"))

    def _display(self, root: str, file: str, cwd: str | None = None) -> str:
        """``file`` in ``root`` as users see it: relative to the project directory, or
        ``~/.claude/workflows/<file>`` for the personal directory (wherever ``home`` puts it)."""
        if root == self.root_of("personal"):
            return f"~/.claude/workflows/{file}"
        full = os.path.join(root, file)
        base = os.path.realpath(cwd or self.cwd)
        if full.startswith(base + os.sep):
            return os.path.relpath(full, base)
        return os.path.join(".claude", "workflows", file)

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """One writer at a time: this process's lock, then the lock file shared by processes."""
        with self._lock:
            if self.lock_path is None:
                yield
                return
            try:
                # The state directory holds no database file when the sidecar is on a server.
                os.makedirs(os.path.dirname(self.lock_path) or ".", mode=0o700, exist_ok=True)
                fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            except OSError as exc:
                raise _write_failed(exc, "taking the library's lock") from exc
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # closing releases the lock

    def _files(self, root: str) -> Iterator[_Found]:
        """The valid workflow files directly in ``root`` (unreadable and invalid ones are skipped: they
        are discovery's to report), in file-name order. A file that is a link to a place this library
        may not reach (:meth:`within`) is skipped unread: a link planted in a workflows directory must
        not show a file outside it.

        Raises:
            LibraryError: ``write_failed`` when ``root`` exists but cannot be listed.
        """
        try:
            names = sorted(os.listdir(root))
        except FileNotFoundError:
            return
        except OSError as exc:
            raise _write_failed(exc, "reading the workflows directory") from exc
        scope: Scope = "personal" if root == self.root_of("personal") else "project"
        for file in names:
            path = os.path.join(root, file)
            if not file.endswith(".js") or not os.path.isfile(path):
                continue
            if self.reachable is not None and not self.reachable(os.path.realpath(path)):
                continue
            try:
                workflow = load_workflow(path, check_syntax=False)
            except WorkflowMcpError:
                continue
            yield _Found(root, scope, file, workflow.meta.name, workflow.source, workflow.source_hash)

    def _file_of(self, root: str, name: str) -> _Found | None:
        """The first file (by name) in ``root`` holding workflow ``name``; its text and hash from one read."""
        return next((f for f in self._files(root) if f.name == name), None)

    def _file_name(self, root: str, name: str) -> str:
        """``<slug>.js``, or ``<slug>-<hash8>.js`` when that file exists and holds another workflow or
        the slug is a device name Windows reserves (:data:`RESERVED_SLUGS`)."""
        slug = slugify(name)
        plain = f"{slug}.js"
        if slug not in RESERVED_SLUGS and not os.path.lexists(os.path.join(root, plain)):
            return plain
        return f"{slug}-{hashlib.sha256(name.encode('utf-8')).hexdigest()[:8]}.js"

    # -- create -------------------------------------------------------------------------------
    def _load(self, source: str) -> Workflow:
        """``source`` loaded under the Claude profile (V8 syntax check included).

        Raises:
            LibraryError: ``invalid_source`` with every loader error, ``invalid_input`` for a name the
                library cannot store.
        """
        if not isinstance(source, str) or not source.strip():
            raise LibraryError("invalid_input", "the workflow source is empty")
        report = validate_workflow(None, source=source)
        if not report.valid:
            errors = [e.to_json() for e in report.errors]
            first = report.errors[0]
            raise LibraryError(
                "invalid_source",
                f"the source breaks {len(errors)} loading rule(s), first: {first}; nothing was written",
                errors=errors,
            )
        workflow = load_workflow(None, source=source, check_syntax=False)
        name = workflow.meta.name
        if not name.strip():
            raise LibraryError("invalid_input", "meta.name is blank; the library needs a visible name")
        if len(name) > MAX_NAME_CHARS:
            raise LibraryError("invalid_input", f"meta.name is longer than {MAX_NAME_CHARS} characters")
        hidden = _invisible(name)
        if hidden is not None:
            raise LibraryError(
                "invalid_input",
                f"meta.name holds {_char(hidden)}, a character that shows nothing or reorders the text "
                "around it (Unicode categories Cc, Cf, Zl, Zp), so two different names would look the "
                "same; remove it",
            )
        return workflow

    def _refuse_look_alikes(
        self, name: str, cwd: str | None, read: Mapping[str, Sequence[_Found]] | None = None
    ) -> None:
        """Refuse ``name`` when it only looks like a workflow, stored version or draft already in a
        workflows directory this library reads (:data:`LOOK_ALIKE_RULE`). ``read``: the files of a
        directory the caller has just listed (``root`` → its files), not read again.

        Raises:
            LibraryError: ``already_exists`` naming the other name, the character and the rule.
        """
        for _, root in self._scopes(cwd):
            files = read[root] if read is not None and root in read else self._files(root)
            names = {f.name for f in files}
            names.update(v.name for v in self.store.versions(root))
            names.update(d.name for d in self._drafts(root))
            for other in sorted(names):
                why = look_alike(name, other)
                if why is not None:
                    raise LibraryError(
                        "already_exists",
                        f"meta.name {name!r} is a look-alike of workflow {other!r} already in "
                        f"{self._display(root, '', cwd).rstrip(os.sep)}: {why} ({LOOK_ALIKE_RULE}); "
                        "give it a visibly different name, or use that workflow's exact name for a new "
                        "version",
                    )

    def create(
        self,
        source: str,
        *,
        version: str | None = None,
        tags: Iterable[str] = (),
        category: str | None = None,
        author: str | None = None,
        fields: Mapping[str, Any] | None = None,
        personal: bool = False,
        cwd: str | None = None,
    ) -> Created:
        """Validate ``source`` and write it as a permanent workflow (see the module docstring).

        ``version`` defaults to ``1.0.0`` for a new name and is required when the name exists.

        Raises:
            LibraryError: ``invalid_version``, ``invalid_input``, ``invalid_source`` (nothing written);
                ``already_exists`` (that ``name@version`` is stored, the name exists and no version was
                given, or the file of that name was not written by the library); ``write_failed``.
        """
        canonical = canonical_version(version) if version is not None else None
        clean_tags = _clean_tags(tags)
        clean_category = _clean(category, "category")
        clean_author = _clean(author, "author")
        extra = _clean_fields(fields)
        workflow = self._load(source)
        name = workflow.meta.name
        scope: Scope = "personal" if personal else "project"
        root = self._writable_root(personal, cwd)
        source_hash = _sha256(source)
        with self._writing():
            here = list(self._files(root))
            self._refuse_look_alikes(name, cwd, {root: here})
            stored = self._versions(root, name)
            existing = next((f for f in here if f.name == name), None)
            current = (
                next((v for v in stored if v.source_hash == existing.source_hash), None) if existing else None
            )
            if existing is not None and current is None:
                raise LibraryError(
                    "already_exists",
                    f"{self._display(root, existing.file, cwd)} already holds workflow {name!r} and the "
                    "library has no version of that exact source (written or edited by hand); edit that "
                    "file, or delete it with workflow_delete first",
                )
            if canonical is None:
                if stored or existing is not None:
                    latest = max((v.version for v in stored), key=_precedence, default=None)
                    raise LibraryError(
                        "already_exists",
                        f"workflow {name!r} already exists"
                        + (f" (latest version {latest})" if latest else "")
                        + "; pass a new version to store this source as a new revision",
                    )
                canonical = "1.0.0"
            file = existing.file if existing is not None else self._file_name(root, name)
            entry = LibraryVersion(
                root=root,
                name=name,
                version=canonical,
                file=file,
                source=source,
                source_hash=source_hash,
                tags=clean_tags,
                category=clean_category,
                author=clean_author,
                fields=extra,
                created_at=_iso(self.clock()),
            )
            try:
                added = self.store.add_version(entry)
            except StoreError as exc:
                raise _store_failed(exc, f"storing {name}@{canonical}") from exc
            if not added:
                raise LibraryError(
                    "already_exists",
                    f"workflow {name}@{canonical} is already stored; bump the version to store a new revision",
                )
            try:
                _atomic_write(root, file, source, new=existing is None)
            except OSError as exc:
                with contextlib.suppress(StoreError):
                    self.store.remove_version(root, name, canonical)
                if isinstance(exc, FileExistsError):
                    raise LibraryError(
                        "already_exists",
                        f"{self._display(root, file, cwd)} appeared while workflow {name!r} was being "
                        "written (another program created it); it was left as it is and nothing was "
                        "written — look at that file, then create again",
                    ) from exc
                raise _write_failed(exc, f"writing workflow {name}@{canonical}") from exc
            promoted = None
            for draft in self._drafts(root):
                if draft.name == name:
                    with contextlib.suppress(StoreError):  # the workflow is stored; a kept draft is harmless
                        self.store.remove_draft(draft.draft_id)
                        promoted = draft.draft_id
        return Created(
            entry=entry,
            scope=scope,
            file=self._display(root, file, cwd),
            previous_version=current.version if current is not None else None,
            promoted_draft=promoted,
        )

    def _versions(self, root: str, name: str) -> list[LibraryVersion]:
        return self.store.versions(root, name)

    # -- drafts -------------------------------------------------------------------------------
    def create_draft(
        self,
        source: str,
        *,
        tags: Iterable[str] = (),
        category: str | None = None,
        author: str | None = None,
        fields: Mapping[str, Any] | None = None,
        owner: str | None = None,
        expires_in_s: float | None = None,
        personal: bool = False,
        cwd: str | None = None,
    ) -> DraftSaved:
        """Validate ``source`` and keep it as the draft of its name (replacing an earlier draft of that
        name, whose id and creation date are kept). ``expires_in_s``: seconds until it is forgotten
        (``None``: kept until deleted or promoted). ``owner`` is the principal that created it.

        Raises:
            LibraryError: ``invalid_input``, ``invalid_source``; ``write_failed`` (the sidecar refused).
        """
        if expires_in_s is not None and not expires_in_s > 0:
            raise LibraryError("invalid_input", "expiresInSeconds must be positive")
        clean_tags = _clean_tags(tags)
        clean_category = _clean(category, "category")
        clean_author = _clean(author, "author")
        workflow = self._load(source)
        now = self.clock()
        root = self._writable_root(personal, cwd)
        draft = LibraryDraft(
            draft_id="draft_" + secrets.token_hex(8),
            root=root,
            name=workflow.meta.name,
            source=source,
            source_hash=_sha256(source),
            tags=clean_tags,
            category=clean_category,
            author=clean_author,
            fields=_clean_fields(fields),
            owner=owner,
            created_at=_iso(now),
            updated_at=_iso(now),
            expires_at=_iso(now + expires_in_s) if expires_in_s is not None else None,
        )
        with self._writing():
            self._refuse_look_alikes(draft.name, cwd)
            try:
                self._drop_expired(root)
                stored, new = self.store.put_draft(draft)
            except StoreError as exc:
                raise _store_failed(exc, f"storing the draft of {draft.name}") from exc
        return DraftSaved(stored, "created" if new else "overwritten")

    def _expired(self, draft: LibraryDraft) -> bool:
        return draft.expires_at is not None and _seconds(draft.expires_at) <= self.clock()

    def _drafts(self, root: str | None) -> list[LibraryDraft]:
        return [d for d in self.store.drafts(root) if not self._expired(d)]

    def _drop_expired(self, root: str) -> None:
        for d in self.store.drafts(root):
            if self._expired(d):
                self.store.remove_draft(d.draft_id)

    def draft(self, ref: str, *, cwd: str | None = None) -> LibraryDraft:
        """The live draft ``ref`` names: a draft id, or ``<name>@draft`` (project first, then personal).

        Raises:
            LibraryError: ``not_found``.
        """
        name = parse_draft_ref(ref)
        if name is None:
            found = self.store.get_draft(ref)
            reachable = found is not None and (self.reachable is None or self.reachable(found.root))
            live = [found] if found is not None and reachable and not self._expired(found) else []
        else:
            live = [d for _, root in self._scopes(cwd) for d in self._drafts(root) if d.name == name]
        if not live:
            raise LibraryError(
                "not_found",
                f"no draft {ref!r} (it was never created, was deleted or promoted, or expired); "
                "create one with workflow_create_draft",
            )
        return live[0]

    def draft_workflow(self, ref: str, *, cwd: str | None = None) -> Workflow:
        """The draft ``ref`` names, loaded to run. It has no file (``path`` ``None``, as an inline
        source): approval judges it by its source hash, never by a directory.

        Raises:
            LibraryError: ``not_found``.
            WorkflowLoadError: the stored source no longer loads (a newer profile).
        """
        d = self.draft(ref, cwd=cwd)
        return load_workflow(None, source=d.source)

    # -- describe -----------------------------------------------------------------------------
    def global_instructions(self) -> str | None:
        """The first readable file of ``instructions``, as text; ``None`` when none exists. A file in
        the project directory is read only where it really lies within what this library may reach
        (:meth:`within`): a link there must not show a file outside it. The other files are the
        operator's (``$WORKFLOW_MCP_INSTRUCTIONS``, the state directory's) and are read as configured."""
        projects = {os.path.abspath(self.cwd) + os.sep, os.path.realpath(self.cwd) + os.sep}
        for path in self.instructions:
            in_project = any(os.path.abspath(path).startswith(p) for p in projects)  # as named, not resolved
            if self.reachable is not None and in_project and not self.reachable(os.path.realpath(path)):
                continue
            try:
                with open(path, encoding="utf-8", errors="replace") as fh:
                    return fh.read()
            except OSError:
                continue
        return None

    def describe(
        self, name: str, *, version: str | None = None, draft: bool = False, cwd: str | None = None
    ) -> Described:
        """The current source of ``name`` (project before personal, as discovery ranks them), a stored
        ``version`` of it, or its draft, with catalog metadata and the global instructions.

        Raises:
            LibraryError: ``invalid_version`` (before any lookup), ``invalid_input`` (blank name),
                ``not_found``, ``version_not_found``.
        """
        canonical = canonical_version(version) if version is not None else None
        name = _clean(name, "name", limit=MAX_NAME_CHARS) or ""
        instructions = self.global_instructions()
        if draft or parse_draft_ref(name) is not None:
            d = self.draft(name if parse_draft_ref(name) else f"{name}{DRAFT_SUFFIX}", cwd=cwd)
            return Described(
                name=d.name,
                kind="draft",
                source=d.source,
                source_hash=d.source_hash,
                version=None,
                current=False,
                scope=None,
                file=None,
                tags=d.tags,
                category=d.category,
                author=d.author,
                fields=d.fields,
                versions=(),
                global_instructions=instructions,
                draft_id=d.draft_id,
                created_at=d.created_at,
                expires_at=d.expires_at,
            )
        for scope, root in self._scopes(cwd):
            stored = sorted(self._versions(root, name), key=lambda v: _precedence(v.version), reverse=True)
            existing = self._file_of(root, name)
            if not stored and existing is None:
                continue
            versions = tuple(v.version for v in stored)
            current = next((v for v in stored if existing and v.source_hash == existing.source_hash), None)
            if canonical is not None:
                chosen = next((v for v in stored if v.version == canonical), None)
                if chosen is None:
                    raise LibraryError(
                        "version_not_found",
                        f"workflow {name!r} has no version {canonical}; stored: {', '.join(versions) or 'none'}",
                    )
            elif current is not None:
                chosen = current
            elif existing is not None:  # a hand-written file: no catalog entry
                return Described(
                    name=name,
                    kind="permanent",
                    source=existing.source,
                    source_hash=existing.source_hash,
                    version=None,
                    current=True,
                    scope=scope,
                    file=self._display(root, existing.file, cwd),
                    tags=(),
                    category=None,
                    author=None,
                    fields={},
                    versions=versions,
                    global_instructions=instructions,
                )
            else:
                raise LibraryError(
                    "not_found",
                    f"workflow {name!r} has no file any more; stored versions: {', '.join(versions)} "
                    "(pass one as version)",
                )
            is_current = current is not None and chosen.version == current.version
            return Described(
                name=name,
                kind="permanent",
                source=chosen.source,
                source_hash=chosen.source_hash,
                version=chosen.version,
                current=is_current,
                scope=scope,
                file=self._display(root, existing.file, cwd) if existing and is_current else None,
                tags=chosen.tags,
                category=chosen.category,
                author=chosen.author,
                fields=chosen.fields,
                versions=versions,
                global_instructions=instructions,
                created_at=chosen.created_at,
            )
        raise LibraryError(
            "not_found", f"no workflow {name!r} in the library; call workflow_list to see what exists"
        )

    # -- list ---------------------------------------------------------------------------------
    def catalog_of(self, workflow: DiscoveredWorkflow) -> LibraryVersion | None:
        """The catalog entry describing this discovered file's exact source (``None``: none)."""
        return self.entry_for(workflow.path, workflow.name, workflow.workflow.source_hash)

    def entry_for(self, path: str, name: str, source_hash: str) -> LibraryVersion | None:
        """The catalog entry of workflow ``name`` whose source hash is ``source_hash``, in the workflows
        directory holding the file ``path`` (``None``: the library has no version of that source)."""
        root = os.path.realpath(os.path.dirname(path))
        return next((v for v in self._versions(root, name) if v.source_hash == source_hash), None)

    def versions_of(self, path: str, name: str) -> tuple[str, ...]:
        """Every stored version of ``name`` in the directory of ``path``, highest precedence first."""
        root = os.path.realpath(os.path.dirname(path))
        return tuple(sorted((v.version for v in self._versions(root, name)), key=_precedence, reverse=True))

    def list(
        self,
        discovered: Iterable[DiscoveredWorkflow],
        *,
        query: str | None = None,
        category: str | None = None,
        tags: Iterable[str] = (),
        include_drafts: bool = False,
        cwd: str | None = None,
    ) -> Listing:
        """The ``discovered`` workflows (and, with ``include_drafts``, the live drafts) that match every
        filter: ``query`` a case-insensitive substring of the name or description, ``category`` a
        case-insensitive substring of the category, ``tags`` all present (case-insensitive). Values are
        trimmed; a blank query or category applies no filter. Workflows keep discovery's order (Claude
        Code's: one per name, by ``localeCompare``); drafts follow, by name.
        """
        needle = (query or "").strip().casefold()
        wanted_category = (category or "").strip().casefold()
        wanted_tags = [t.strip().casefold() for t in tags if t.strip()]
        filters: dict[str, Any] = {}
        if needle:
            filters["query"] = needle
        if wanted_category:
            filters["category"] = wanted_category
        if wanted_tags:
            filters["tags"] = wanted_tags
        rows: list[ListedWorkflow] = []
        for w in discovered:
            entry = self.catalog_of(w) if w.source != "plugin" else None
            rows.append(
                ListedWorkflow(
                    name=w.name,
                    description=w.description,
                    kind="permanent",
                    version=entry.version if entry else None,
                    tags=entry.tags if entry else (),
                    category=entry.category if entry else None,
                    author=entry.author if entry else None,
                    source=w.source,
                    path=w.path,
                    versions=self.versions_of(w.path, w.name) if w.source != "plugin" else (),
                )
            )
        if include_drafts:
            for scope, root in self._scopes(cwd):
                for d in self._drafts(root):
                    try:
                        description = load_workflow(
                            None, source=d.source, check_syntax=False
                        ).meta.description
                    except WorkflowMcpError:
                        description = ""
                    rows.append(
                        ListedWorkflow(
                            name=d.name,
                            description=description,
                            kind="draft",
                            version=None,
                            tags=d.tags,
                            category=d.category,
                            author=d.author,
                            source=scope,
                            path=None,
                            draft_id=d.draft_id,
                        )
                    )

        def matches(row: ListedWorkflow) -> bool:
            if needle and needle not in f"{row.name}\n{row.description}".casefold():
                return False
            if wanted_category and wanted_category not in (row.category or "").casefold():
                return False
            have = {t.casefold() for t in row.tags}
            return all(t in have for t in wanted_tags)

        permanent = [r for r in rows if r.kind == "permanent" and matches(r)]  # discovery's order
        drafts = sorted((r for r in rows if r.kind == "draft" and matches(r)), key=_row_order)
        found = permanent + drafts
        hint = None
        if not found:
            hint = (
                f"nothing matches {filters}; drop or broaden a filter (tags must all be present)"
                if filters
                else "no workflows yet; create one with workflow_create"
            )
        return Listing(tuple(found), filters, hint)

    # -- delete -------------------------------------------------------------------------------
    def _resolve_target(
        self, name: str, version: str | None, draft: bool, cwd: str | None, personal: bool | None
    ) -> tuple[_Target, bool]:
        """``(target, removes_file)`` for a delete of ``name``."""
        if draft or parse_draft_ref(name) is not None:
            d = self.draft(name if parse_draft_ref(name) else f"{name}{DRAFT_SUFFIX}", cwd=cwd)
            return _Target(d.root, None, d.name, d.source_hash, draft_id=d.draft_id), False
        only: tuple[Scope, ...] = ("personal",) if personal else ("project", "personal")
        for scope, root in self._scopes(cwd, only):
            stored = self._versions(root, name)
            existing = self._file_of(root, name)
            if not stored and existing is None:
                continue
            current = next((v for v in stored if existing and v.source_hash == existing.source_hash), None)
            if version is None:
                if existing is None:
                    raise LibraryError(
                        "not_found",
                        f"workflow {name!r} has no file any more; pass one of its stored versions "
                        f"({', '.join(v.version for v in stored)}) to delete it",
                    )
                target = _Target(root, scope, name, existing.source_hash, file=existing.file)
                target.version = current.version if current else None
                return target, True
            chosen = next((v for v in stored if v.version == version), None)
            if chosen is None:
                raise LibraryError(
                    "version_not_found",
                    f"workflow {name!r} has no version {version}; stored: "
                    f"{', '.join(v.version for v in stored) or 'none'}",
                )
            is_current = current is not None and current.version == version and existing is not None
            target = _Target(
                root,
                scope,
                name,
                chosen.source_hash,
                version=version,
                file=existing.file if is_current and existing else None,
            )
            return target, is_current
        raise LibraryError(
            "not_found", f"no workflow {name!r} to delete; call workflow_list to see what exists"
        )

    def prepare_delete(
        self,
        name: str,
        *,
        version: str | None = None,
        draft: bool = False,
        personal: bool | None = None,
        cwd: str | None = None,
        record: bool = True,
        holder: str = "",
    ) -> DeletePrompt:
        """Resolve what a delete of ``name`` (its current file, a stored ``version``, or its draft) would
        remove and record a confirmation; nothing is deleted yet. ``record=False`` only resolves the
        target (the prompt's ``token`` is then empty and confirms nothing). ``holder`` names who may
        answer it (an HTTP client's principal; ``""``: the local user): the token confirms only when
        :meth:`confirm_delete` is given the same ``holder``.

        Raises:
            LibraryError: ``invalid_version`` (before any lookup), ``invalid_input``, ``not_found``,
                ``version_not_found``; ``write_failed`` (the sidecar refused to record the prompt).
        """
        canonical = canonical_version(version) if version is not None else None
        name = _clean(name, "name", limit=MAX_NAME_CHARS + len(DRAFT_SUFFIX)) or ""
        target, removes_file = self._resolve_target(name, canonical, draft, cwd, personal)
        token = secrets.token_urlsafe(24) if record else ""
        expires = self.clock() + CONFIRM_TTL_S
        if record:
            confirmation = DeleteConfirmation(
                token_hash=_confirmation_hash(token, holder),
                root=target.root,
                name=target.name,
                source_hash=target.source_hash,
                expires_at=expires,
                version=target.version,
                draft_id=target.draft_id,
                file=target.file if removes_file else None,
            )
            try:
                self.store.add_confirmation(confirmation)
            except StoreError as exc:
                raise _store_failed(exc, "recording the delete confirmation") from exc
        return DeletePrompt(
            token=token,
            name=target.name,
            kind="draft" if target.draft_id else "permanent",
            version=target.version,
            file=self._display(target.root, target.file, cwd) if target.file else None,
            removes_file=removes_file,
            expires_at=_iso(expires),
            source_hash=target.source_hash,
        )

    def discard_delete(self, token: str, *, holder: str = "") -> None:
        """Use up the confirmation of ``token`` (given to ``holder``) without deleting anything (the user
        declined), so it can never be answered later. Unknown tokens are ignored."""
        with contextlib.suppress(StoreError):
            self.store.take_confirmation(_confirmation_hash(token, holder))

    def confirm_delete(self, token: str, *, cwd: str | None = None, holder: str = "") -> Deleted:
        """Delete what the prompt of ``token`` showed, if it is unchanged. The token works once, and only
        for the ``holder`` it was given to (another holder's attempt is ``confirmation_invalid`` and
        leaves it unused).

        Raises:
            LibraryError: ``confirmation_invalid`` (never issued, used already, or older than
                :data:`CONFIRM_TTL_S`); ``target_changed`` (the file or draft is gone or its source changed
                since the prompt; nothing deleted); ``write_failed``.
        """
        with self._writing():
            try:
                c = self.store.take_confirmation(_confirmation_hash(token, holder))
            except StoreError as exc:
                raise _store_failed(exc, "reading the delete confirmation") from exc
            if c is None or c.expires_at <= self.clock():
                raise LibraryError(
                    "confirmation_invalid",
                    "this confirmation was never issued, was used already, or is older than "
                    f"{int(CONFIRM_TTL_S // 60)} minutes; call workflow_delete again",
                )
            changed = LibraryError(
                "target_changed",
                f"{c.name!r} changed since the confirmation was asked (its source or file is not the one "
                "shown); nothing was deleted — call workflow_delete again to see the current target",
            )
            if c.draft_id is not None:
                d = self.store.get_draft(c.draft_id)
                if d is None or d.source_hash != c.source_hash:
                    raise changed
                try:
                    self.store.remove_draft(c.draft_id)
                except StoreError as exc:
                    raise _store_failed(exc, f"deleting the draft of {c.name}") from exc
                return Deleted(c.name, "draft", None, None, removed_file=False)
            removed_dir = False
            if c.file is not None:
                removed_dir = self._remove_file(c.root, c.file, c.source_hash, c.name, changed)
            elif c.version is not None:
                stored = next((v for v in self._versions(c.root, c.name) if v.version == c.version), None)
                if stored is None or stored.source_hash != c.source_hash:
                    raise changed
            if c.version is not None:
                with contextlib.suppress(StoreError):
                    self.store.remove_version(c.root, c.name, c.version)
            return Deleted(
                c.name,
                "permanent",
                c.version,
                self._display(c.root, c.file, cwd) if c.file else None,
                removed_file=c.file is not None,
                removed_directory=removed_dir,
            )

    @staticmethod
    def _remove_file(root: str, file: str, source_hash: str, name: str, changed: LibraryError) -> bool:
        """Remove ``root/file`` if it still holds the source of ``source_hash``, through a descriptor of
        ``root`` reached without following links (a directory swapped for a link, or a file swapped for
        one, is ``changed``); then remove ``root`` if that emptied it. Returns whether ``root`` went."""
        try:
            with opened_directory(root) as dir_fd:
                try:
                    data, st = read_file_in(dir_fd, file)
                except FileNotFoundError:
                    raise changed from None
                if hashlib.sha256(data).hexdigest() != source_hash:
                    raise changed
                if not remove_file_in(dir_fd, file, st):
                    raise changed
                if os.listdir(dir_fd):
                    return False
        except OSError as exc:
            if exc.errno in RACED or isinstance(exc, FileNotFoundError):
                raise changed from None
            raise _write_failed(exc, f"deleting workflow {name}") from exc
        parent, leaf = os.path.split(root)
        with contextlib.suppress(OSError), opened_directory(parent) as parent_fd:
            os.rmdir(leaf, dir_fd=parent_fd)  # only if still empty: rmdir refuses otherwise
            return True
        return False


def _row_order(row: ListedWorkflow) -> tuple[Any, ...]:
    """Name, then higher precedence first (no version last, drafts after versions)."""
    if row.version is None:
        return (row.name, 1, 0, row.kind)
    return (row.name, 0, _Desc(_precedence(row.version)), row.kind)


@dataclass(frozen=True)
class _Desc:
    """Orders versions by descending semver precedence (so a release comes before its prereleases)."""

    version: semver.Version

    def __lt__(self, other: _Desc) -> bool:
        return self.version > other.version


def _atomic_write(root: str, file: str, source: str, *, new: bool = False) -> None:
    """Write ``source`` (UTF-8, exactly) to ``root/file`` through a temporary file renamed over it, so a
    reader sees the old file or the new one, never a part (mode 0644 less the umask). ``root`` (a real
    path) is reached and created without following a link, and every step works inside it
    (:mod:`workflow_mcp._safe_files`), so a link planted meanwhile cannot redirect the write.

    With ``new`` the file must not exist yet (one created meanwhile by another program is kept).

    Raises:
        FileExistsError: ``new`` and ``root/file`` exists.
        OSError: ``ELOOP``/``ENOTDIR`` (a component became a link or a file), ``ENOSPC``, ``EROFS``.
    """
    with opened_directory(root, create=True) as dir_fd:
        replace_file_in(dir_fd, file, source.encode("utf-8"), mode=0o644, new=new)
