"""Issue 31 item 6 (COCO / SPD part): annotations with empty or malformed masks are counted per annotation,
out of the annotations (never out of the pairs asked for, which raised count-exceeds-total), and a pair
broken by one NaN is counted once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

N_BAD = 12  # more bad annotations than pairs asked for


def _coco(root: Path) -> Path:
    """One 160x120 photo: five editable squares, N_BAD annotations of an unknown category, three whose
    polygon has a NaN or infinite coordinate, and two editable objects whose polygon covers no pixel."""
    (root / "val2017").mkdir(parents=True)
    (root / "annotations").mkdir()
    img = np.random.default_rng(0).integers(90, 140, (120, 160, 3), dtype=np.uint8)
    anns: list[dict[str, Any]] = []
    for aid, (x, y) in enumerate([(10, 10), (50, 10), (90, 10), (10, 50), (50, 50)], start=1):
        img[y:y + 20, x:x + 20] = (200, 30, 30)
        anns.append({"id": aid, "image_id": 7, "category_id": 1, "bbox": [x, y, 20, 20], "area": 400.0,
                     "iscrowd": 0, "segmentation": [[x, y, x + 19, y, x + 19, y + 19, x, y + 19]]})
    Image.fromarray(img).save(root / "val2017" / "a.png")
    anns += [{"id": 100 + k, "image_id": 7, "category_id": 42, "bbox": [0, 0, 5, 5], "area": 25,
              "segmentation": []} for k in range(N_BAD)]
    anns += [{"id": 200 + k, "image_id": 7, "category_id": 1, "bbox": [0, 0, 5, 5], "area": 25,
              "segmentation": [[1, 2, v, 4, 5, 6]]} for k, v in enumerate([float("nan"), float("inf"),
                                                                           float("-inf")])]
    # a polygon wholly outside the photo (a bad export) rasterises to nothing: an empty mask
    anns += [{"id": 300 + k, "image_id": 7, "category_id": 1, "bbox": [120, 90, 20, 20], "area": 400.0,
              "iscrowd": 0, "segmentation": [[-60 - k, -60, -40, -60, -40, -40, -60, -40]]}
             for k in range(2)]
    data = {"images": [{"id": 7, "file_name": "a.png", "width": 160, "height": 120}],
            "annotations": anns, "categories": [{"id": 1, "name": "box"}]}
    (root / "annotations" / "instances_val2017.json").write_text(json.dumps(data))  # NaN / Infinity literals
    return root


def test_bad_annotations_and_empty_masks_count_per_annotation(tmp_path: Path) -> None:
    pytest.importorskip("cv2", reason='opencv-python-headless missing: pip install -e ".[spdfaith]"')
    from faithtests.protocols.spdfaith.coco_edits import build_coco_pairs
    from faithtests.scorecard.record_values import counted_rows
    from faithtests.scorecard.recording import Faith

    pairs = build_coco_pairs(_coco(tmp_path / "coco"), 20, 2, 0, seed=0, cache_dir=tmp_path / "cache",
                             types=("color",))
    n_ann = 5 + N_BAD + 3 + 2
    rows = {k: (n, total) for k, n, total, _ in counted_rows(pairs, pairs.total, None, ())}
    assert rows["unknown category"] == (N_BAD, n_ann)  # out of the annotations, not the pairs
    assert rows["bad segmentation"] == (3, n_ann)  # NaN / inf coordinates never reach OpenCV
    # every empty-mask object once, however often the planner tried it (20 singles exhaust every pool,
    # the multi-edit pairs try objects again; loaded objects: 5 + 2)
    assert rows["empty mask"] == (2, 7)
    assert all(n <= total for n, total in rows.values())
    faith = Faith("test_x.py::test_x[coco]", "difference_consistency")
    faith.counted(pairs, pairs.total)  # raised count-exceeds-total before


def test_a_nan_pair_is_rejected_once() -> None:
    """Same, different and count logits NaN for one pair: one 'non-finite score', not one per prompt."""
    from types import SimpleNamespace

    import torch

    from faithtests.models.interfaces import Decision
    from faithtests.protocols.spdfaith.judge import world_judge
    from faithtests.protocols.spdfaith.run import Usable, run_variant
    from faithtests.scorecard.kinds import NONFINITE

    class Vlm:
        spec, num_layers = "nan", 2

        def decide(self, prompts: Any, options: Any, hooks: Any = None) -> Decision:
            logits = torch.zeros(len(prompts), len(options))
            logits[0] = torch.nan  # the first pair, in every question
            logits[1:, 0] = 1.0
            return Decision(logits, torch.ones(2, len(prompts), 3))

        def generate(self, prompts: Any, max_new_tokens: int = 32, hooks: Any = None) -> list[str]:
            return ["nothing" for _ in prompts]

    recs = [SimpleNamespace(item_id=f"p{i}", m=1) for i in range(3)]
    im = Image.new("RGB", (4, 4))
    data = Usable(records=recs, pairs=[(im, im)] * 3, total=3)  # type: ignore[arg-type]
    ans = run_variant(Vlm(), data, "base", world_judge())  # type: ignore[arg-type]
    assert ans.counted.invalid[NONFINITE] == 1
    assert ans.counted.examples[NONFINITE] == ["p0: same/different/count not finite"]
    assert [bool(x) for x in ans.answered] == [False, True, True]
