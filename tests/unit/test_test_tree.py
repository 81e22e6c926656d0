"""The test tree itself: pytest imports each test module by its base name (no packages, rootdir
sys.path insertion), so two test files with one name in different folders break collection."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_module_has_a_base_name_of_its_own() -> None:
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert sorted(name for name, count in names.items() if count > 1) == []
