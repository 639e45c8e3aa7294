"""The committed reference checkpoints load through the public paths and reproduce their model cards.

Each ``fixtures/NAME/heldout.json`` holds the card's numbers (``heldout``, n = 200 per task) and a small
``smoke`` sample (the first ``smoke_n`` items of the same held-out streams), recorded by
``python -m faithtests.world.evaluate NAME --record``. Evaluation is deterministic, so the smoke numbers
must reproduce within a small tolerance (float summation order across torch builds).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
CLIPS = ("clip", "clip-colorblind")
VLMS = ("vlm", "vlm-textbiased", "vlm-positionbiased")
TOLERANCE = 0.05


def _card(name: str) -> dict[str, Any]:
    path = FIXTURES / name / "heldout.json"
    if not path.is_file():
        pytest.fail(f"reference checkpoint {name} has no recorded evaluation at {path}")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


@pytest.fixture(scope="module", autouse=True)
def _threads() -> None:
    import torch

    torch.set_num_threads(1)


def _present(names: tuple[str, ...]) -> list[str]:
    return [n for n in names if (FIXTURES / n).is_dir()]


@pytest.mark.parametrize("name", _present(CLIPS + VLMS))
def test_checkpoint_is_small(name: str) -> None:
    size = sum(p.stat().st_size for p in (FIXTURES / name).iterdir())
    assert size < 5 * 2**20, f"{name} is {size / 2**20:.1f} MiB"


@pytest.mark.parametrize("name", _present(CLIPS + VLMS))
def test_checkpoint_reproduces_its_smoke_numbers(name: str) -> None:
    from faithtests.world.evaluate import load_reference, smoke_report

    card = _card(name)
    got = smoke_report(load_reference(name), name, int(card["smoke_n"]))
    for key, want in card["smoke"].items():
        assert abs(got[key] - want) <= TOLERANCE, f"{name} {key}: {got[key]:.3f} vs recorded {want:.3f}"


def test_colourblind_twin_is_worse_on_colour_flips_only() -> None:
    good, blind = _card("clip")["heldout"], _card("clip-colorblind")["heldout"]
    assert good["PR_colour"] - blind["PR_colour"] >= 0.2
    for kind in ("number", "object"):
        assert abs(good[f"PR_{kind}"] - blind[f"PR_{kind}"]) <= 0.15, kind
