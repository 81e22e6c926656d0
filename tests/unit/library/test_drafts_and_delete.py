"""Drafts (sidecar only, overwritten in place, expiring, promoted), describe with global instructions,
listing with filters, and the two-step delete (single use, 10 minutes, target_changed)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from workflow_mcp.definitions.discover import find_workflows
from workflow_mcp.errors import LibraryError
from workflow_mcp.library import CONFIRM_TTL_S, Library
from workflow_mcp.service import WorkflowService
from workflow_mcp.store.library import MemoryLibraryStore

from library_kit import Places, source


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def lib(places: Places, clock: Clock) -> Library:
    return Library(MemoryLibraryStore(), cwd=str(places.project), home=str(places.home), clock=clock)


# -- drafts ------------------------------------------------------------------------------------
def test_a_draft_is_invisible_to_discovery_and_overwriting_it_keeps_its_creation_date(
    lib: Library, places: Places, clock: Clock
) -> None:
    first = lib.create_draft(source("plan", "first"), tags=["wip"], owner="http:alice")
    assert first.status == "created"
    assert not places.workflows.exists()
    assert find_workflows(str(places.project), str(places.home)).workflows == []
    clock.now += 60
    second = lib.create_draft(source("plan", "second"))
    assert second.status == "overwritten"
    assert second.draft.draft_id == first.draft.draft_id
    assert second.draft.created_at == first.draft.created_at
    assert second.draft.updated_at > first.draft.updated_at
    assert "second" in lib.draft("plan@draft").source
    assert lib.draft(first.draft.draft_id).source == second.draft.source


def test_a_draft_runs_by_name_at_draft_without_a_file(lib: Library) -> None:
    lib.create_draft(source("plan"))
    workflow = lib.draft_workflow("plan@draft")
    assert workflow.meta.name == "plan" and workflow.path is None
    with pytest.raises(LibraryError) as exc:
        lib.draft_workflow("other@draft")
    assert exc.value.reason == "not_found"


def test_a_draft_with_an_expiry_is_gone_after_it(lib: Library, clock: Clock) -> None:
    saved = lib.create_draft(source("plan"), expires_in_s=30)
    assert saved.draft.expires_at is not None
    clock.now += 29
    assert lib.draft("plan@draft").draft_id == saved.draft.draft_id
    clock.now += 2
    with pytest.raises(LibraryError) as exc:
        lib.draft("plan@draft")
    assert exc.value.reason == "not_found"
    assert lib.create_draft(source("plan")).status == "created"  # the expired one no longer counts
    with pytest.raises(LibraryError):
        lib.create_draft(source("plan"), expires_in_s=0)


def test_creating_the_workflow_promotes_its_draft(lib: Library, places: Places) -> None:
    draft = lib.create_draft(source("plan", "tried"), tags=["wip"])
    created = lib.create(draft.draft.source, version="1.0.0", tags=["ready"])
    assert created.promoted_draft == draft.draft.draft_id
    assert (places.workflows / "plan.js").read_text() == draft.draft.source
    with pytest.raises(LibraryError):
        lib.draft("plan@draft")
    assert [w.name for w in find_workflows(str(places.project), str(places.home)).workflows] == ["plan"]


# -- describe ----------------------------------------------------------------------------------
def test_describe_returns_global_instructions_or_null(places: Places, tmp_path: Path) -> None:
    instructions = tmp_path / "instructions.md"
    lib = Library(
        MemoryLibraryStore(), cwd=str(places.project), home=str(places.home), instructions=[str(instructions)]
    )
    lib.create(source("deploy"))
    assert lib.describe("deploy").global_instructions is None
    instructions.write_text("# Be careful\nAsk before deploying.\n")
    assert lib.describe("  deploy  ").global_instructions == "# Be careful\nAsk before deploying.\n"


def test_describe_refuses_a_bad_version_before_looking_and_names_what_is_missing(lib: Library) -> None:
    with pytest.raises(LibraryError) as bad:
        lib.describe("nothing-here", version="one")
    assert bad.value.reason == "invalid_version"
    with pytest.raises(LibraryError) as missing:
        lib.describe("nothing-here")
    assert missing.value.reason == "not_found"
    lib.create(source("deploy"), version="1.0.0")
    with pytest.raises(LibraryError) as no_version:
        lib.describe("deploy", version="2.0.0")
    assert no_version.value.reason == "version_not_found" and "1.0.0" in str(no_version.value)
    with pytest.raises(LibraryError) as blank:
        lib.describe("   ")
    assert blank.value.reason == "invalid_input"


def test_versions_are_ordered_by_semver_precedence_releases_before_their_prereleases(lib: Library) -> None:
    for i, v in enumerate(["1.9.0", "2.0.0-rc.1", "1.10.0", "2.0.0-rc.2", "2.0.0", "2.0.0-beta"]):
        lib.create(source("deploy", f"n{i}"), version=v)
    assert lib.describe("deploy").versions == (
        "2.0.0",
        "2.0.0-rc.2",
        "2.0.0-rc.1",
        "2.0.0-beta",
        "1.10.0",
        "1.9.0",
    )


def test_a_hand_written_workflow_is_described_without_a_version(lib: Library, places: Places) -> None:
    places.workflows.mkdir(parents=True)
    (places.workflows / "x.js").write_text(source("hand"))
    d = lib.describe("hand")
    assert (d.version, d.current, d.file, d.tags) == (None, True, ".claude/workflows/x.js", ())


# -- list --------------------------------------------------------------------------------------
def _listed(lib: Library, places: Places, **filters: object) -> list[str]:
    found = find_workflows(str(places.project), str(places.home)).workflows
    return [w.name for w in lib.list(found, **filters).workflows]  # type: ignore[arg-type]


def test_list_filters_by_query_category_and_all_tags(lib: Library, places: Places) -> None:
    lib.create(source("deploy", "Ship the App"), tags=["ops", "Prod"], category="Release/Web")
    lib.create(source("audit", "check deps"), tags=["ops"], category="security")
    lib.create(source("notes", "write notes"))
    assert _listed(lib, places) == ["audit", "deploy", "notes"]
    assert _listed(lib, places, query="  the app ") == ["deploy"]
    assert _listed(lib, places, query="AUD") == ["audit"]
    assert _listed(lib, places, category=" release ") == ["deploy"]
    assert _listed(lib, places, tags=["OPS"]) == ["audit", "deploy"]
    assert _listed(lib, places, tags=["ops", " prod "]) == ["deploy"]
    assert _listed(lib, places, query="  ", category="", tags=[" "]) == ["audit", "deploy", "notes"]


def test_an_empty_listing_echoes_the_filters_with_a_hint(lib: Library, places: Places) -> None:
    lib.create(source("deploy"), tags=["ops"])
    found = find_workflows(str(places.project), str(places.home)).workflows
    listing = lib.list(found, query=" zz ", tags=["ops", "nope"])
    assert listing.workflows == ()
    assert listing.filters == {"query": "zz", "tags": ["ops", "nope"]}
    assert listing.hint is not None and "broaden" in listing.hint


def test_drafts_are_listed_only_when_asked(lib: Library, places: Places) -> None:
    lib.create(source("deploy"))
    lib.create_draft(source("plan"), tags=["wip"])
    found = find_workflows(str(places.project), str(places.home)).workflows
    assert [w.name for w in lib.list(found).workflows] == ["deploy"]
    rows = lib.list(found, include_drafts=True, tags=["wip"]).workflows
    assert [(w.name, w.kind) for w in rows] == [("plan", "draft")]


def test_a_hand_edited_file_is_listed_without_its_old_catalog_entry(lib: Library, places: Places) -> None:
    lib.create(source("deploy"), tags=["ops"])
    (places.workflows / "deploy.js").write_text(source("deploy", "edited"))
    assert _listed(lib, places, tags=["ops"]) == []
    assert _listed(lib, places) == ["deploy"]


# -- delete ------------------------------------------------------------------------------------
def test_a_confirmed_delete_removes_the_file_its_entry_and_the_emptied_directory(
    lib: Library, places: Places
) -> None:
    lib.create(source("deploy"), version="1.0.0")
    prompt = lib.prepare_delete("deploy")
    assert (prompt.name, prompt.version, prompt.file, prompt.removes_file) == (
        "deploy", "1.0.0", ".claude/workflows/deploy.js", True,
    )  # fmt: skip
    assert (places.workflows / "deploy.js").is_file()  # nothing deleted before the answer
    deleted = lib.confirm_delete(prompt.token)
    assert deleted.removed_file and deleted.removed_directory
    assert not places.workflows.exists() and (places.project / ".claude").is_dir()
    assert lib.store.versions() == []


def test_a_directory_still_holding_a_file_stays(lib: Library, places: Places) -> None:
    lib.create(source("deploy"))
    (places.workflows / "README.txt").write_text("kept")
    deleted = lib.confirm_delete(lib.prepare_delete("deploy").token)
    assert deleted.removed_file and not deleted.removed_directory
    assert (places.workflows / "README.txt").read_text() == "kept"


def test_a_confirmation_works_once(lib: Library, places: Places) -> None:
    lib.create(source("deploy"))
    prompt = lib.prepare_delete("deploy")
    lib.confirm_delete(prompt.token)
    lib.create(source("deploy"))
    with pytest.raises(LibraryError) as replay:
        lib.confirm_delete(prompt.token)
    assert replay.value.reason == "confirmation_invalid"
    assert (places.workflows / "deploy.js").is_file()
    with pytest.raises(LibraryError) as forged:
        lib.confirm_delete("not-a-token-this-server-issued")
    assert forged.value.reason == "confirmation_invalid"


def test_a_confirmation_expires_after_ten_minutes(lib: Library, places: Places, clock: Clock) -> None:
    lib.create(source("deploy"))
    late = lib.prepare_delete("deploy")
    clock.now += CONFIRM_TTL_S
    with pytest.raises(LibraryError) as exc:
        lib.confirm_delete(late.token)
    assert exc.value.reason == "confirmation_invalid" and "10 minutes" in str(exc.value)
    in_time = lib.prepare_delete("deploy")
    clock.now += CONFIRM_TTL_S - 1
    assert lib.confirm_delete(in_time.token).removed_file


def test_a_target_that_changed_between_prompt_and_answer_is_not_deleted(lib: Library, places: Places) -> None:
    lib.create(source("deploy"))
    prompt = lib.prepare_delete("deploy")
    edited = source("deploy", "changed meanwhile")
    (places.workflows / "deploy.js").write_text(edited)
    with pytest.raises(LibraryError) as exc:
        lib.confirm_delete(prompt.token)
    assert exc.value.reason == "target_changed"
    assert (places.workflows / "deploy.js").read_text() == edited
    gone = lib.prepare_delete("deploy")
    os.unlink(places.workflows / "deploy.js")
    with pytest.raises(LibraryError) as missing:
        lib.confirm_delete(gone.token)
    assert missing.value.reason == "target_changed"


def test_deleting_an_earlier_version_keeps_the_file(lib: Library, places: Places) -> None:
    lib.create(source("deploy", "one"), version="1.0.0")
    lib.create(source("deploy", "two"), version="1.1.0")
    prompt = lib.prepare_delete("deploy", version="v1.0.0")
    assert not prompt.removes_file and prompt.version == "1.0.0"
    deleted = lib.confirm_delete(prompt.token)
    assert not deleted.removed_file
    assert lib.describe("deploy").versions == ("1.1.0",)
    assert "two" in (places.workflows / "deploy.js").read_text()


def test_deleting_a_draft_frees_its_name_for_a_new_draft(lib: Library) -> None:
    lib.create_draft(source("plan"))
    prompt = lib.prepare_delete("plan", draft=True)
    assert prompt.kind == "draft" and prompt.file is None
    assert lib.confirm_delete(prompt.token).kind == "draft"
    with pytest.raises(LibraryError):
        lib.draft("plan@draft")
    assert lib.create_draft(source("plan")).status == "created"


def test_delete_refuses_bad_versions_first_and_names_missing_targets(lib: Library) -> None:
    with pytest.raises(LibraryError) as bad:
        lib.prepare_delete("deploy", version="1")
    assert bad.value.reason == "invalid_version"
    with pytest.raises(LibraryError) as missing:
        lib.prepare_delete("deploy")
    assert missing.value.reason == "not_found"
    lib.create(source("deploy"))
    with pytest.raises(LibraryError) as no_version:
        lib.prepare_delete("deploy", version="9.9.9")
    assert no_version.value.reason == "version_not_found"


def test_the_service_library_keeps_confirmations_across_processes(places: Places) -> None:
    a = places.service()
    a.library.create(source("deploy"))
    token = a.library.prepare_delete("deploy").token
    a.store.close()
    b: WorkflowService = places.service()  # another process, the same state database
    try:
        assert b.library.confirm_delete(token).removed_file
    finally:
        b.store.close()
