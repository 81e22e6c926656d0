"""Version probes shared by the providers' ``probe()`` (availability without any secret)."""

from __future__ import annotations

import importlib.metadata
import subprocess
from typing import Literal

__all__ = ["dist_version", "program_version"]


def dist_version(dist: str) -> str | None:
    """The installed version of the distribution ``dist``, or ``None`` when it is not installed."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def program_version(path: str, word: Literal["first", "last"] = "last") -> str | None:
    """The ``first`` or ``last`` word ``path --version`` prints (10 s at most), or ``None``."""
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    words = done.stdout.strip().split()
    if not words:
        return None
    return words[0] if word == "first" else words[-1]
