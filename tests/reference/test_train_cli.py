"""The train-reference entry point: argument handling and clear errors (training itself is the cards'
job: fixtures/README.md records each run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from faithtests.reference.train import RECIPES, main, train_reference


def test_known_names() -> None:
    assert set(RECIPES) == {"clip", "clip-colorblind", "vlm", "vlm-textbiased", "vlm-positionbiased",
                            "vlm-sameprior", "vlm-diffblind", "omni", "omni-deaf"}


def test_unknown_name_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="unknown reference model 'nope'"):
        train_reference("nope")
    with pytest.raises(SystemExit):
        main(["nope"])


def test_twin_without_its_base_checkpoint_names_the_fix(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="train-reference vlm"):
        main(["vlm-textbiased", "--out", str(tmp_path / "vlm-textbiased")])
