"""Names that look alike but are not equal (Unicode normalisation forms, full-width letters, letters of
another script, invisible and bidi-control characters) and file names that another OS reserves: one
rule refuses each look-alike, naming the rule and the character; reserved device names never become
file names."""

from __future__ import annotations

import unicodedata

import pytest

from workflow_mcp.errors import LibraryError
from workflow_mcp.library import Library
from workflow_mcp.store.library import MemoryLibraryStore

from library_kit import Places, source


@pytest.fixture
def lib(places: Places) -> Library:
    return Library(MemoryLibraryStore(), cwd=str(places.project), home=str(places.home))


@pytest.mark.parametrize(
    ("first", "second", "named"),
    [
        (unicodedata.normalize("NFC", "Café deploy"), unicodedata.normalize("NFD", "Café deploy"), "NFKC"),
        ("Deploy", "Ｄｅｐｌｏｙ", "NFKC"),  # full-width letters
        ("Deploy", "Deploy", None),  # the same name: a new version, not a look-alike
        ("Deploy", "D\u0435ploy", "U+0435 CYRILLIC SMALL LETTER IE"),
        ("Paypal", "\u0420aypal", "U+0420 CYRILLIC CAPITAL LETTER ER"),
        ("file", "\ufb01le", "NFKC"),  # a ligature
    ],
)
def test_a_name_that_only_looks_like_an_existing_one_is_refused_naming_the_rule(
    lib: Library, places: Places, first: str, second: str, named: str | None
) -> None:
    lib.create(source(first))
    if named is None:
        assert lib.create(source(second), version="2.0.0").entry.version == "2.0.0"
        return
    with pytest.raises(LibraryError) as exc:
        lib.create(source(second))
    assert exc.value.reason == "already_exists"
    message = str(exc.value)
    assert "look-alike" in message and named in message and repr(first) in message
    assert len(list(places.workflows.iterdir())) == 1
    assert [v.name for v in lib.store.versions()] == [first]
    with pytest.raises(LibraryError) as draft:
        lib.create_draft(source(second))  # drafts follow the same rule
    assert draft.value.reason == "already_exists" and "look-alike" in str(draft.value)


def test_a_look_alike_of_a_hand_written_file_or_a_draft_is_refused(lib: Library, places: Places) -> None:
    places.workflows.mkdir(parents=True)
    (places.workflows / "mine.js").write_text(source("Release"))
    lib.create_draft(source("Review"))
    for look_alike in ("R\u0435lease", "R\u0435view"):
        with pytest.raises(LibraryError) as exc:
            lib.create(source(look_alike))
        assert exc.value.reason == "already_exists" and "look-alike" in str(exc.value)


@pytest.mark.parametrize(
    ("name", "named"),
    [
        ("De\u200dploy", "U+200D ZERO WIDTH JOINER"),
        ("\u202eyolpeD", "U+202E RIGHT-TO-LEFT OVERRIDE"),
        ("Deploy\u2066x\u2069", "U+2066 LEFT-TO-RIGHT ISOLATE"),
        ("Dep\u00adloy", "U+00AD SOFT HYPHEN"),
        ("Deploy\u0007", "U+0007"),
    ],
)
def test_invisible_and_bidi_control_characters_in_a_name_are_refused(
    lib: Library, places: Places, name: str, named: str
) -> None:
    with pytest.raises(LibraryError) as exc:
        lib.create(source(name))
    assert exc.value.reason == "invalid_input" and named in str(exc.value)
    assert not places.workflows.exists()


def test_names_that_differ_visibly_stay_distinct_workflows(lib: Library) -> None:
    for name in ("Deploy", "deploy", "Deploy 2", "Déploy", "Рабочий процесс", "Процесс", "step-1", "step-l"):
        lib.create(source(name))
    assert len(lib.store.versions()) == 8


@pytest.mark.parametrize("name", ["CON", "nul", "Aux", "com1", "LPT9", "prn.", "Con "])
def test_a_name_that_another_os_reserves_as_a_device_never_becomes_a_file_name(
    lib: Library, places: Places, name: str
) -> None:
    created = lib.create(source(name))
    stem = created.file.rsplit("/", 1)[1].removesuffix(".js")
    assert stem.split("-")[0] == name.strip(" .").lower() and "-" in stem
    assert [p.name for p in places.workflows.iterdir()] == [f"{stem}.js"]
