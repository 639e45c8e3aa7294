"""One fixtures root everywhere: ``$FAITHTESTS_FIXTURES``, else the checkout's ``fixtures/``; training
never writes into an installed package."""

from __future__ import annotations

from pathlib import Path

import pytest

from faithtests.models import locations


def test_env_overrides_the_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAITHTESTS_FIXTURES", str(tmp_path))
    assert locations.fixtures_root() == tmp_path == locations.writable_fixtures_root()


def test_checkout_fixtures_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FAITHTESTS_FIXTURES", raising=False)
    root = locations.checkout_root()
    assert root is not None and (root / "pyproject.toml").is_file()
    assert locations.fixtures_root() == root / "fixtures" == locations.writable_fixtures_root()


def test_no_checkout_means_a_clear_error_for_training(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FAITHTESTS_FIXTURES", raising=False)
    monkeypatch.setattr(locations, "checkout_root", lambda: None)
    with pytest.raises(FileNotFoundError, match="pass --out DIR, or set FAITHTESTS_FIXTURES"):
        locations.writable_fixtures_root()
