"""A workflows directory changed by another program while the library writes into it: a link planted
between the library resolving the directory and writing (or deleting) never sends the write or the
delete elsewhere. The swap happens at the one moment in between (the sidecar call), through a sidecar
twin that runs the swap there."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from workflow_mcp.errors import LibraryError
from workflow_mcp.library import Library
from workflow_mcp.store.base import DeleteConfirmation, LibraryVersion
from workflow_mcp.store.library import MemoryLibraryStore

from library_kit import Places, source


class SwappingStore(MemoryLibraryStore):
    """The sidecar twin, running ``swap`` once inside the next ``add_version`` or ``take_confirmation``
    (after the library resolved its directory, before it writes or deletes)."""

    def __init__(self) -> None:
        super().__init__()
        self.swap: Callable[[], None] | None = None

    def _fire(self) -> None:
        swap, self.swap = self.swap, None
        if swap is not None:
            swap()

    def add_version(self, entry: LibraryVersion) -> bool:
        self._fire()
        return super().add_version(entry)

    def take_confirmation(self, token_hash: str) -> DeleteConfirmation | None:
        self._fire()
        return super().take_confirmation(token_hash)


@pytest.fixture
def store() -> SwappingStore:
    return SwappingStore()


@pytest.fixture
def lib(places: Places, store: SwappingStore) -> Library:
    return Library(store, cwd=str(places.project), home=str(places.home))


def _link_instead(path: Path, target: Path) -> Callable[[], None]:
    def swap() -> None:
        path.rename(path.with_name(path.name + ".moved"))
        path.symlink_to(target, target_is_directory=True)

    return swap


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("swapped", ["workflows", ".claude"])
def test_a_directory_swapped_for_a_link_during_a_create_writes_nothing_through_the_link(
    lib: Library, store: SwappingStore, places: Places, tmp_path: Path, swapped: str
) -> None:
    lib.create(source("kept"))
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "workflows").mkdir(parents=True)
    (elsewhere / "workflows" / "secret.txt").write_text("untouched")
    target = places.workflows if swapped == "workflows" else places.project / ".claude"
    store.swap = _link_instead(target, elsewhere / "workflows" if swapped == "workflows" else elsewhere)
    with pytest.raises(LibraryError) as exc:
        lib.create(source("deploy"))
    assert exc.value.reason == "write_failed"
    message = str(exc.value)
    assert "symbolic link" in message and "nothing was written" in message
    assert str(tmp_path) not in message
    assert _tree(elsewhere) == {"workflows/secret.txt": b"untouched"}
    assert [v.name for v in store.versions()] == ["kept"]  # the refused one taken back


def test_a_directory_swapped_for_a_link_before_a_confirmed_delete_deletes_nothing_there(
    lib: Library, store: SwappingStore, places: Places, tmp_path: Path
) -> None:
    lib.create(source("deploy"))
    copy = (places.workflows / "deploy.js").read_bytes()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "deploy.js").write_bytes(copy)  # the same bytes: the hash check alone would pass
    prompt = lib.prepare_delete("deploy")
    store.swap = _link_instead(places.workflows, elsewhere)
    with pytest.raises(LibraryError) as exc:
        lib.confirm_delete(prompt.token)
    assert exc.value.reason == "target_changed"
    assert (elsewhere / "deploy.js").read_bytes() == copy
    assert [v.name for v in store.versions()] == ["deploy"]


def test_a_workflow_file_swapped_for_a_link_is_not_deleted_through_it(
    lib: Library, store: SwappingStore, places: Places, tmp_path: Path
) -> None:
    lib.create(source("deploy"))
    outside = tmp_path / "outside.js"
    outside.write_bytes((places.workflows / "deploy.js").read_bytes())
    prompt = lib.prepare_delete("deploy")

    def swap() -> None:
        os.unlink(places.workflows / "deploy.js")
        (places.workflows / "deploy.js").symlink_to(outside)

    store.swap = swap
    with pytest.raises(LibraryError) as exc:
        lib.confirm_delete(prompt.token)
    assert exc.value.reason == "target_changed"
    assert outside.is_file() and (places.workflows / "deploy.js").is_symlink()


def test_a_link_planted_as_the_workflow_file_is_never_written_through(
    lib: Library, places: Places, tmp_path: Path
) -> None:
    lib.create(source("deploy"), version="1.0.0")
    outside = tmp_path / "outside.js"
    outside.write_text("keep me")
    os.unlink(places.workflows / "deploy.js")
    (places.workflows / "deploy.js").symlink_to(outside)
    created = lib.create(source("deploy", "second"), version="2.0.0")
    assert outside.read_text() == "keep me" and (places.workflows / "deploy.js").is_symlink()
    assert (
        created.file.startswith(".claude/workflows/deploy-")
        and not Path(places.project, created.file).is_symlink()
    )


def test_a_file_planted_under_the_chosen_name_while_creating_is_never_overwritten(
    lib: Library, store: SwappingStore, places: Places
) -> None:
    places.workflows.mkdir(parents=True)
    planted = places.workflows / "deploy.js"

    def plant() -> None:
        planted.write_text("// written by another program meanwhile\n")

    store.swap = plant
    with pytest.raises(LibraryError) as exc:
        lib.create(source("deploy"))
    assert exc.value.reason == "already_exists" and "appeared while" in str(exc.value)
    assert planted.read_text() == "// written by another program meanwhile\n"
    assert [p.name for p in places.workflows.iterdir()] == ["deploy.js"]  # no temporary file left
    assert store.versions() == []
