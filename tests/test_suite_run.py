"""The helpers that run a suite as a user would (faithtests.testing.suite_run): which ``--faith-cache``
folder a module's suite runs share (no suite is run here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from faithtests.testing.suite_run import CACHE_ENV, SuiteCards, env_cache, env_cache_args


class _Tmp:
    def __init__(self, root: Path) -> None:
        self.root = root

    def mktemp(self, basename: str, numbered: bool = True) -> Path:
        path = self.root / basename
        path.mkdir()
        return path


def test_suite_cards_share_a_cache_only_when_asked_or_given_one(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CACHE_ENV, raising=False)
    assert env_cache() is None and env_cache_args() == ()
    alone = SuiteCards(tmp_path, "suites/x.py", _Tmp(tmp_path / "a"))
    assert alone.cache is None and alone.cache_args() == ()
    (tmp_path / "b").mkdir()
    shared = SuiteCards(tmp_path, "suites/x.py", _Tmp(tmp_path / "b"), shared_cache=True)
    assert shared.cache == tmp_path / "b" / "outputs" and shared.cache.is_dir()
    assert shared.cache_args() == ("--faith-cache", str(shared.cache))
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "ci"))
    with pytest.raises(FileNotFoundError, match=r"\$FAITH_TEST_CACHE=.*/ci is not a folder"):
        env_cache()
    (tmp_path / "ci").mkdir()
    assert env_cache_args() == ("--faith-cache", str(tmp_path / "ci"))
    for cards in (SuiteCards(tmp_path, "suites/x.py", _Tmp(tmp_path)),
                  SuiteCards(tmp_path, "suites/x.py", _Tmp(tmp_path), shared_cache=True)):
        assert cards.cache_args() == ("--faith-cache", str(tmp_path / "ci"))
