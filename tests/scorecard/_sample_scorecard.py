"""A realistic scorecard built from fixed data, shared by the render, CLI and Chromium tests:
two suites, two models plus a variant, slices (one failing slice check), a test-supplied plot with a
CI band, failure exemplars and hardest items with a real (tiny) PIL thumbnail (one card repeated within
a test and one across tests), invalid counts, item-level outcomes and a hostile caption; and a baseline
against which reference:clip regresses."""

from __future__ import annotations

import base64
import io
from dataclasses import replace

from PIL import Image, ImageDraw

from faithtests.scorecard.baseline import compare
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
    colour = e_inv + 0.03  # checked: fails for the failing model (0.17 > 0.10), only visible as a slice
    results.append(MetricResult("lgip", test, "E_inv", colour, model=model, n=100, higher_is_better=False,
                                slice="colour", threshold=0.10, op="<=", passed=colour <= 0.10, gate="point"))
    results.append(
        MetricResult("lgip", test, "E_inv", e_inv - 0.01, model=model, n=100, higher_is_better=False,
                     slice="count")
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
        dataset="coco",
        outcome="passed" if passed else "failed",
        duration=1.5,
        results=results,
        exemplars=[*ex, ex[0]] if not passed else [hardest_card(model)],
        invalid=[InvalidCount("empty caption", 2, 200, ["coco/0001.jpg: caption ''"], model=model)],
        items={"invariant": {"img1": True, "img2": passed, "img3": False}},
        message="" if passed else "E_inv = 0.14 [0.12, 0.16] n=200; threshold <= 0.1",
    )


def hardest_card(model: str) -> Exemplar:
    """The closest call of a passing test: shown as a hardest item, never as a failure."""
    return Exemplar(reason="smallest margin", texts={"caption": "a red circle"}, scores={"margin": 0.01},
                    image=thumbnail("red"), model=model)


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
    pairs = [
        Exemplar(
            reason="accepted a false premise",
            texts={"question": "Why is the square blue?"},
            scores={"p_yes": 0.9 - i / 100},
            image=thumbnail("green"),
            image_b=thumbnail("blue"),
            model=model,
            variant=variant,
        )
        for i in range(10)
    ]
    if (model, variant) == (CLIP, "base"):  # the very card the lgip test showed: counted, not repeated
        pairs.append(hardest_card(CLIP))
    return TestRecord(
        test=test,
        suite="premise",
        dataset="world",
        outcome="passed" if pr >= 0.8 else "failed",
        duration=0.7,
        results=res,
        plots=[plot],
        exemplars=pairs,
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


def sample_baseline() -> Scorecard:
    """The previous run: reference:clip's E_inv was 0.01 (now 0.05: a regression, lower is better)."""
    base = sample_scorecard()
    t0 = base.tests[0]
    assert t0.results[0].model == CLIP and t0.results[0].metric == "E_inv"
    base.tests[0] = replace(t0, results=[replace(t0.results[0], value=0.01), *t0.results[1:]])
    return base


def sample_with_regressions() -> tuple[Scorecard, Scorecard]:
    """(current, baseline) with the gate's regressions recorded on the current scorecard."""
    current, base = sample_scorecard(), sample_baseline()
    current.regressions = [d.to_json() for d in compare(current, base).regressions]
    return current, base
