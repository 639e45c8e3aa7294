"""A realistic scorecard built from fixed data, shared by the render, CLI and Chromium tests:
two suites, two models plus a variant, slices, a test-supplied plot with a CI band, exemplars with a
real (tiny) PIL thumbnail, invalid counts, item-level outcomes and a hostile caption."""

from __future__ import annotations

import base64
import io

from PIL import Image, ImageDraw

from faithtests.scorecard.model import Exemplar, InvalidCount, MetricResult, Plot, Series, TestRecord
from faithtests.scorecard.scorecard import Scorecard

CLIP = "reference:clip"
OC = "open_clip:ViT-B-32@laion2b_s34b_b79k"
HOSTILE = "<script>alert('x')</script> a red circle"


def thumbnail(color: str = "red", size: int = 24) -> str:
    img = Image.new("RGB", (size, size), "white")
    ImageDraw.Draw(img).ellipse((4, 4, size - 4, size - 4), fill=color)
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=80)
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode()


def _lgip(model: str, e_inv: float, passed: bool) -> TestRecord:
    test = f"suites/test_lgip.py::test_invariance[{model}]"
    results = [
        MetricResult(
            "lgip",
            test,
            "E_inv",
            e_inv,
            model=model,
            ci=(e_inv - 0.02, e_inv + 0.02),
            n=200,
            higher_is_better=False,
            threshold=0.10,
            op="<=",
            passed=passed,
            gate="point",
        ),
        MetricResult("lgip", test, "E_sens", 0.61 if model == CLIP else 0.55, model=model, n=200),
    ]
    for sl, v in (("colour", e_inv + 0.03), ("count", e_inv - 0.01)):
        results.append(
            MetricResult("lgip", test, "E_inv", v, model=model, n=100, higher_is_better=False, slice=sl)
        )
    ex = [
        Exemplar(
            reason=f"paraphrase flipped the ranking ({i})",
            texts={"caption": HOSTILE, "paraphrase": "a circle that is red"},
            scores={"s_caption": 0.31, "s_paraphrase": 0.12},
            image=thumbnail("red"),
            model=model,
        )
        for i in range(3)
    ]
    return TestRecord(
        test=test,
        suite="lgip",
        outcome="passed" if passed else "failed",
        duration=1.5,
        results=results,
        exemplars=ex if not passed else [],
        invalid=[InvalidCount("empty caption", 2, 200, ["coco/0001.jpg: caption ''"], model=model)],
        items={"invariant": {"img1": True, "img2": passed, "img3": False}},
        message="" if passed else "E_inv = 0.14 [0.12, 0.16] n=200; threshold <= 0.1",
    )


def _premise(model: str, variant: str, pr: float) -> TestRecord:
    test = f"suites/test_premise.py::test_rejection[{model}-{variant}]"
    res = [
        MetricResult(
            "premise",
            test,
            "PR",
            pr,
            model=model,
            variant=variant,
            ci=(pr - 0.05, pr + 0.04),
            n=80,
            threshold=0.8,
            op=">=",
            passed=pr >= 0.8,
            gate="ci",
        )
    ]
    plot = Plot(
        "rejection vs layer",
        "line",
        [
            Series(
                f"{model} {variant}",
                [0, 1, 2, 3],
                [0.5, 0.6, pr, pr],
                [0.45, 0.55, pr - 0.05, pr - 0.05],
                [0.55, 0.65, pr + 0.05, pr + 0.05],
            )
        ],
        x_label="layer",
        y_label="PR",
    )
    pair = Exemplar(
        reason="accepted a false premise",
        texts={"question": "Why is the square blue?"},
        scores={"p_yes": 0.9},
        image=thumbnail("green"),
        image_b=thumbnail("blue"),
        model=model,
        variant=variant,
    )
    return TestRecord(
        test=test,
        suite="premise",
        outcome="passed" if pr >= 0.8 else "failed",
        duration=0.7,
        results=res,
        plots=[plot],
        exemplars=[pair] * 10,
        invalid=[
            InvalidCount("unparseable answer", 3, 80, ["'maybe'", "''", "'C'"], model=model, variant=variant)
        ],
    )


def sample_scorecard(status: str = "complete") -> Scorecard:
    tests = [
        _lgip(CLIP, 0.05, True),
        _lgip(OC, 0.14, False),
        _premise(CLIP, "base", 0.86),
        _premise(CLIP, "pgla", 0.91),
        _premise(OC, "base", 0.72),
    ]
    fp = {
        "python": "3.11.9",
        "packages": {"torch": "2.14.1", "faithtests": "0.1.0"},
        "device": "cpu",
        "dtype": "float32",
        "seed": 0,
        "models": {CLIP: {"sha256": "ab12"}},
        "start": "2025-01-01T00:00:00",
        "end": "2025-01-01T00:05:00",
    }
    return Scorecard(fingerprint=fp, tests=tests, status=status)
