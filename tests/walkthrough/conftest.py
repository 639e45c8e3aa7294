"""Walkthroughs: a test here does, in a throwaway copy of the repository, what a page of the docs says a
contributor does (add a protocol, add a metric), runs there what must keep passing, and asserts which
files the change touched, so the docs' "this is all you touch" is checked, not only written.

The fixture is here; the tools are in ``_repo_copy.py`` (``from _repo_copy import changed_paths,
run_in_copy, imported_from``): ``run_in_copy(copy, "pytest", ..., timeout=...)`` runs ``python -m ...``
in the copy with the copy first on ``PYTHONPATH``. A walkthrough runs only what it needs (one suite
file, a few fast library tests in the copy), never the whole test suite.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _repo_copy import ROOT, copy_tracked, git


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    """This checkout's files in ``tmp_path / "repo"`` (tracked and untracked-not-ignored, as the working
    tree holds them: ``_repo_copy.copy_tracked``), committed there as a git baseline, so that
    ``_repo_copy.changed_paths(copy)`` lists exactly what the test then changes. The copied
    ``.gitignore`` keeps ``__pycache__`` out of that list; write reports and builds outside the copy."""
    copy = copy_tracked(ROOT, tmp_path / "repo")
    git(copy, "init", "-q")
    git(copy, "add", "-A")
    git(copy, "commit", "-q", "-m", "baseline: the checkout under test")
    return copy
