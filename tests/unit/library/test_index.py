"""The live discovery index: cached, always current (fingerprint of the discovery inputs), refreshed in
the background by a watchfiles watcher, and available from the first call."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from workflow_mcp._index import DiscoveryIndex
from workflow_mcp.errors import WorkflowNotFoundError
from workflow_mcp.service import WorkflowService

from library_kit import Places, source

BOUND_S = 20.0


@pytest.fixture
def index() -> Iterator[DiscoveryIndex]:
    idx = DiscoveryIndex()
    try:
        yield idx
    finally:
        idx.close()


def _names(index: DiscoveryIndex, places: Places) -> list[str]:
    return [w.name for w in index.get(str(places.project), str(places.home)).workflows]


def test_a_second_listing_is_served_from_the_index(index: DiscoveryIndex, places: Places) -> None:
    places.workflows.mkdir(parents=True)
    (places.workflows / "a.js").write_text(source("a"))
    assert _names(index, places) == ["a"]
    assert _names(index, places) == ["a"]
    assert index.builds == 1


def test_a_file_written_a_moment_ago_is_listed_at_once(index: DiscoveryIndex, places: Places) -> None:
    assert _names(index, places) == []
    places.workflows.mkdir(parents=True)
    (places.workflows / "b.js").write_text(source("b"))
    assert _names(index, places) == ["b"]  # no waiting for the watcher
    (places.workflows / "b.js").write_text(source("b2"))
    assert _names(index, places) == ["b2"]
    (places.personal).mkdir(parents=True)
    (places.personal / "p.js").write_text(source("p"))
    assert _names(index, places) == ["b2", "p"]
    (places.workflows / "b.js").unlink()
    assert _names(index, places) == ["p"]


def test_the_watcher_rebuilds_in_the_background_even_for_a_directory_that_did_not_exist(
    index: DiscoveryIndex, places: Places
) -> None:
    assert _names(index, places) == []
    generation = index.generation
    places.workflows.mkdir(parents=True)  # .claude/workflows appears under the watched project
    (places.workflows / "c.js").write_text(source("c"))
    assert index.wait_for_generation(generation, BOUND_S), "the watcher never rebuilt the index"
    while _names(index, places) != ["c"] or index.generation == generation:  # bounded by the wait above
        assert index.wait_for_generation(index.generation, BOUND_S)
    built = index.builds
    assert _names(index, places) == ["c"] and index.builds == built  # ready before the read


def test_the_index_refuses_a_directory_that_is_not_one(index: DiscoveryIndex, places: Places) -> None:
    with pytest.raises(WorkflowNotFoundError):
        index.get(str(places.project / "nope"))


def test_the_service_lists_what_the_library_just_wrote(service: WorkflowService, places: Places) -> None:
    assert service.list_workflows().workflows == []
    service.library.create(source("fresh"))
    assert [w.name for w in service.list_workflows().workflows] == ["fresh"]
    service.index.close()
