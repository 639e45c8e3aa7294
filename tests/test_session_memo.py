"""``faithtests.config.session_memo``: the one memo every protocol fixture keeps its per-(model,
dataset) data and its records in (one computation per session, whatever the number of tests)."""

from __future__ import annotations

import pytest

from faithtests.config import session_memo


def test_each_key_is_made_once_per_session_and_kept_apart(pytestconfig: pytest.Config) -> None:
    key = pytest.StashKey[dict[tuple[str, str], list[str]]]()
    made: list[tuple[str, str]] = []

    def make(k: tuple[str, str]) -> list[str]:
        made.append(k)
        return [f"{k[0]} on {k[1]}"]

    first = session_memo(pytestconfig, key, ("vlm", "world"), lambda: make(("vlm", "world")))
    again = session_memo(pytestconfig, key, ("vlm", "world"), lambda: make(("vlm", "world")))
    other = session_memo(pytestconfig, key, ("vlm", "coco"), lambda: make(("vlm", "coco")))
    assert first is again and first == ["vlm on world"] and other == ["vlm on coco"]
    assert made == [("vlm", "world"), ("vlm", "coco")]
    # another key is another memo, even for the same (model, dataset)
    assert session_memo(pytestconfig, pytest.StashKey[dict[tuple[str, str], int]](), ("vlm", "world"),
                        lambda: 7) == 7


def test_a_failed_make_is_not_kept(pytestconfig: pytest.Config) -> None:
    """A load that raised (missing data, say) is not remembered as a result: the next test raises again
    with the same error rather than reading a half-made entry."""
    key = pytest.StashKey[dict[str, int]]()

    def broken() -> int:
        raise FileNotFoundError("imavb data not found: /nowhere")

    for _ in range(2):
        with pytest.raises(FileNotFoundError, match="/nowhere"):
            session_memo(pytestconfig, key, "imavb", broken)
    assert session_memo(pytestconfig, key, "imavb", lambda: 3) == 3
