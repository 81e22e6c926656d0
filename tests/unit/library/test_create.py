"""Creating workflows in the library: validation first, the exact file Claude Code reads, semantic
versions, slugs, the sidecar's catalog, and one winner among concurrent creates."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import pytest

from workflow_mcp.definitions.discover import find_workflows
from workflow_mcp.definitions.load import load_workflow
from workflow_mcp.errors import LibraryError
from workflow_mcp.library import canonical_version, slugify
from workflow_mcp.service import WorkflowService

from library_kit import Places, source


def _reason(exc: pytest.ExceptionInfo[LibraryError]) -> str:
    return exc.value.reason


def test_a_created_workflow_is_the_exact_source_in_the_project_and_claude_s_loader_accepts_it(
    service: WorkflowService, places: Places
) -> None:
    text = source("deploy", "Deploy the app")
    created = service.library.create(text, tags=["ops"], category="release", author="ana")
    path = places.workflows / "deploy.js"
    assert path.read_bytes() == text.encode("utf-8")  # nothing added: no YAML, no comment
    assert created.file == ".claude/workflows/deploy.js" and created.scope == "project"
    assert created.entry.version == "1.0.0"
    assert created.entry.source_hash == hashlib.sha256(path.read_bytes()).hexdigest()
    loaded = load_workflow(path)  # the default profile is Claude Code's, V8 syntax check included
    assert loaded.meta.name == "deploy" and loaded.source_hash == created.entry.source_hash
    found = find_workflows(str(places.project), str(places.home))
    assert [w.name for w in found.workflows] == ["deploy"]
    assert found.diagnostics == []


def test_a_personal_workflow_goes_to_the_personal_directory(service: WorkflowService, places: Places) -> None:
    created = service.library.create(source("mine"), personal=True)
    assert (places.personal / "mine.js").is_file()
    assert not places.workflows.exists()
    assert created.scope == "personal" and created.file == "~/.claude/workflows/mine.js"


@pytest.mark.parametrize(
    ("given", "canonical"),
    [
        ("1.0.0", "1.0.0"),
        ("v1.0.0", "1.0.0"),
        ("V2.3.4", "2.3.4"),
        ("  1.0.0  ", "1.0.0"),
        ("1.0.0+build.5", "1.0.0"),
        ("v1.0.0-rc.1+sha.abc", "1.0.0-rc.1"),
        ("2.0.0-alpha", "2.0.0-alpha"),
    ],
)
def test_versions_are_stored_in_canonical_semver_form(given: str, canonical: str) -> None:
    assert canonical_version(given) == canonical


@pytest.mark.parametrize("bad", ["1.0", "latest", "01.0.0", "1.0.0.0", "", "v", "1.0.0-", "1.0.0+"])
def test_a_version_that_is_not_semver_is_refused(bad: str) -> None:
    with pytest.raises(LibraryError) as exc:
        canonical_version(bad)
    assert _reason(exc) == "invalid_version" and "semantic version" in str(exc.value)


def test_an_invalid_version_is_refused_before_the_source_is_even_read(
    service: WorkflowService, places: Places
) -> None:
    with pytest.raises(LibraryError) as exc:
        service.library.create("not javascript at all (", version="1.0")
    assert _reason(exc) == "invalid_version"
    assert not places.workflows.exists()


def test_an_invalid_source_is_refused_with_the_loader_s_errors_and_nothing_is_written(
    service: WorkflowService, places: Places
) -> None:
    bad = 'export const meta = { name: "x", description: `tpl ${1}` }\nreturn 1\n'
    with pytest.raises(LibraryError) as exc:
        service.library.create(bad)
    assert _reason(exc) == "invalid_source"
    assert exc.value.errors and exc.value.errors[0]["rule"]
    assert exc.value.errors[0]["line"] == 1
    with pytest.raises(LibraryError) as syntax:
        service.library.create(source("y", body="return ((("))
    assert _reason(syntax) == "invalid_source" and syntax.value.errors[0]["rule"] == "syntax"
    assert not places.workflows.exists()
    assert service.library.store.versions() == []


def test_an_existing_name_needs_a_new_version_and_the_previous_source_stays_retrievable(
    service: WorkflowService, places: Places
) -> None:
    lib = service.library
    first = source("deploy", "one")
    lib.create(first, version="1.0.0", tags=["ops"])
    second = source("deploy", "two")
    with pytest.raises(LibraryError) as no_version:
        lib.create(second)
    assert _reason(no_version) == "already_exists" and "1.0.0" in str(no_version.value)
    with pytest.raises(LibraryError) as same:
        lib.create(second, version="v1.0.0+build.9")  # canonically the stored 1.0.0
    assert _reason(same) == "already_exists"
    created = lib.create(second, version="1.1.0", tags=["ops", "new"])
    assert created.previous_version == "1.0.0"
    assert (places.workflows / "deploy.js").read_text() == second
    current = lib.describe("deploy")
    assert (current.version, current.current, current.tags) == ("1.1.0", True, ("ops", "new"))
    old = lib.describe("deploy", version="1.0.0")
    assert (old.source, old.current, old.tags, old.file) == (first, False, ("ops",), None)
    assert current.versions == ("1.1.0", "1.0.0")


def test_a_file_the_library_did_not_write_is_never_overwritten(
    service: WorkflowService, places: Places
) -> None:
    places.workflows.mkdir(parents=True)
    by_hand = source("deploy", "hand-written")
    (places.workflows / "deploy.js").write_text(by_hand)
    with pytest.raises(LibraryError) as exc:
        service.library.create(source("deploy", "library"), version="2.0.0")
    assert _reason(exc) == "already_exists" and "by hand" in str(exc.value)
    assert (places.workflows / "deploy.js").read_text() == by_hand


def test_a_hand_edit_of_a_library_file_is_kept_not_overwritten(
    service: WorkflowService, places: Places
) -> None:
    service.library.create(source("deploy"), version="1.0.0")
    edited = source("deploy", "edited by hand")
    (places.workflows / "deploy.js").write_text(edited)
    with pytest.raises(LibraryError) as exc:
        service.library.create(source("deploy", "v2"), version="2.0.0")
    assert _reason(exc) == "already_exists"
    assert (places.workflows / "deploy.js").read_text() == edited


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("Deploy", "deploy"),
        ("Café Plan", "cafe-plan"),
        ("  spaced  out  ", "spaced-out"),
        ("Рабочий процесс", "workflow"),
        ("a/b\\c..d", "a-b-c-d"),
        ("x" * 300, "x" * 64),
    ],
)
def test_slugs_keep_ascii_letters_and_digits(name: str, slug: str) -> None:
    assert slugify(name) == slug


def test_names_whose_slugs_coincide_never_share_a_file(service: WorkflowService, places: Places) -> None:
    lib = service.library
    a = lib.create(source("Deploy"))
    b = lib.create(source("deploy"))
    c = lib.create(source("Рабочий процесс"))
    d = lib.create(source("Процесс"))
    digest = hashlib.sha256(b"deploy").hexdigest()[:8]
    assert a.file.endswith("/deploy.js") and b.file.endswith(f"/deploy-{digest}.js")
    assert c.file.endswith("/workflow.js") and d.file.endswith(
        "-" + hashlib.sha256("Процесс".encode()).hexdigest()[:8] + ".js"
    )
    names = sorted(w.name for w in find_workflows(str(places.project), str(places.home)).workflows)
    assert names == sorted(["Deploy", "deploy", "Рабочий процесс", "Процесс"])
    # a new version of the second one goes to its own file, not the first one's
    lib.create(source("deploy", "v2"), version="2.0.0")
    assert "v2" in (places.workflows / f"deploy-{digest}.js").read_text()
    assert "v2" not in (places.workflows / "deploy.js").read_text()


def test_blank_or_oversized_metadata_is_refused_before_anything_is_written(
    service: WorkflowService, places: Places
) -> None:
    for kwargs in ({"tags": ["  "]}, {"category": " "}, {"author": ""}, {"category": "c" * 300}):
        with pytest.raises(LibraryError) as exc:
            service.library.create(source("deploy"), **kwargs)
        assert _reason(exc) == "invalid_input"
    with pytest.raises(LibraryError) as long_name:
        service.library.create(source("n" * 201))
    assert _reason(long_name) == "invalid_input"
    assert not places.workflows.exists()


def test_of_concurrent_creates_of_one_name_and_version_exactly_one_wins(places: Places) -> None:
    services = [places.service() for _ in range(6)]  # six connections to one database, as six servers
    barrier = threading.Barrier(len(services))
    outcomes: list[str] = []

    def create(svc: WorkflowService, i: int) -> None:
        barrier.wait(timeout=10)
        try:
            svc.library.create(source("race", f"writer {i}"), version="1.0.0")
            outcomes.append("created")
        except LibraryError as exc:
            outcomes.append(exc.reason)

    threads = [threading.Thread(target=create, args=(s, i)) for i, s in enumerate(services)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert sorted(outcomes) == ["already_exists"] * 5 + ["created"]
        versions = services[0].library.store.versions()
        assert len(versions) == 1
        assert (places.workflows / "race.js").read_text() == versions[0].source
        assert [p.name for p in places.workflows.iterdir()] == ["race.js"]  # no temporary file left
    finally:
        for s in services:
            s.store.close()


def test_the_catalog_is_keyed_by_directory_so_two_projects_may_hold_one_name(tmp_path: Path) -> None:
    one, two = Places(tmp_path / "one"), Places(tmp_path / "two")
    shared = one.state / "state.db"
    from workflow_mcp.store.sqlite import SqliteStore

    a = WorkflowService(SqliteStore(shared), cwd=str(one.project), home=str(one.home))
    b = WorkflowService(SqliteStore(shared), cwd=str(two.project), home=str(two.home))
    try:
        a.library.create(source("deploy"), version="1.0.0")
        b.library.create(source("deploy"), version="1.0.0")
        assert (one.workflows / "deploy.js").is_file() and (two.workflows / "deploy.js").is_file()
    finally:
        a.store.close()
        b.store.close()


def test_fields_must_be_a_json_object_of_bounded_size(service: WorkflowService, places: Places) -> None:
    for bad in ({"when": object()}, {"x": float("nan")}, {"blob": "x" * 70_000}):
        with pytest.raises(LibraryError) as exc:
            service.library.create(source("deploy"), fields=bad)
        assert exc.value.reason == "invalid_input"
    assert not places.workflows.exists()
