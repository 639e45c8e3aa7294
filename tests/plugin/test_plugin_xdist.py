"""Serial and ``-n 2`` runs of the same suites produce the same scorecard (records ride on reports)."""

from __future__ import annotations

import json
from typing import Any

import numpy  # noqa: F401  (inline runs restore sys.modules; numpy cannot be imported twice)
import PIL.Image  # noqa: F401  (same)
import pytest

PLUGINS = (
    "-p",
    "faithtests.plugin",
    "-p",
    "no:cacheprovider",
    "-p",
    "no:hypothesispytest",
    "-p",
    "no:anyio",
    "-W",
    "ignore::pytest.PytestAssertRewriteWarning",
)

CONFTEST = """
import pytest
from faithtests.plugin.options import register_model_info

@pytest.fixture(scope="session")
def clip(pytestconfig):
    register_model_info(pytestconfig, "clip", {"spec": "reference:clip", "sha256": "0f1e"})
    return "clip"
"""

SUITE_A = """
import numpy as np
import pytest
from PIL import Image
from faithtests.scorecard.model import Series

SCORES = {"base": [0.9, 0.8, 0.7, 0.95], "colorblind": [0.4, 0.5, 0.3, 0.6]}

@pytest.mark.parametrize("variant", ["base", "colorblind"])
def test_scores(faith, clip, variant):
    faith.bind(model=clip)
    s = np.array(SCORES[variant])
    faith.metric("mean_score", s.mean(), ci=(s.min(), s.max()), n=s.size)
    faith.items("correct", {f"i{k}": bool(v > 0.5) for k, v in enumerate(s)})
    image = Image.new("RGB", (200, 100), (30, 60, 200))
    faith.exemplars([{"image": image, "texts": {"caption": "a blue box"},
                      "scores": {"s": float(s[0])}, "reason": f"{variant} example"}])
    faith.plot("score per item", kind="bar", series=[Series(variant, list(range(4)), s.tolist())])
    faith.invalid("unparseable", 1, total=5, examples=["maybe"])
    faith.check("mean_score", ">=", 0.6)

@pytest.mark.parametrize("k", range(3))
def test_slices(faith, k):
    faith.metric("acc", [0.5, 0.75, 1.0][k], slice=f"s{k}")

def test_skipped(faith):
    pytest.skip("no data")
"""

SUITE_B = """
import pytest

@pytest.mark.suite("premise")
def test_marked():
    pass

def test_e(faith):
    faith.metric("E_inv", 0.25, higher_is_better=False)
    faith.check("E_inv", "<=", 0.1)
"""


def _normalised(sc: dict[str, Any]) -> dict[str, Any]:
    tests = [{k: v for k, v in t.items() if k != "duration"} for t in sc["tests"]]
    return {
        "results": sc["results"],
        "tests": tests,
        "exemplars": sc["exemplars"],
        "status": sc["status"],
        "models": sc["fingerprint"]["models"],
    }


def test_xdist_scorecard_equals_serial(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_scores=SUITE_A, test_other=SUITE_B)
    serial = pytester.runpytest(*PLUGINS, "--faith-report", "serial")
    serial.assert_outcomes(passed=5, failed=2, skipped=1)
    parallel = pytester.runpytest_subprocess(*PLUGINS, "-p", "xdist", "-n", "2", "--faith-report", "par")
    parallel.assert_outcomes(passed=5, failed=2, skipped=1)
    a = json.loads((pytester.path / "serial" / "scorecard.json").read_text())
    b = json.loads((pytester.path / "par" / "scorecard.json").read_text())
    assert b["fingerprint"]["workers"] == 2 and a["fingerprint"]["workers"] is None
    assert len(a["results"]) == 6 and len(a["tests"]) == 8
    assert _normalised(a) == _normalised(b)
    assert a["fingerprint"]["models"] == {"clip": {"spec": "reference:clip", "sha256": "0f1e"}}
    assert (pytester.path / "par" / "scorecard.html").exists()


GROUPED = """
import pytest

@pytest.mark.xdist_group(name="clip")
@pytest.mark.parametrize("k", range(4))
def test_grouped(faith, k):
    faith.metric("acc", k / 4)
"""


def test_loadgroup_ids_equal_serial(pytester: pytest.Pytester) -> None:
    """``--dist loadgroup`` appends ``@group`` to node ids; the scorecard must not carry it, or a
    baseline from a serial run would match nothing in a parallel one."""
    pytester.makepyfile(test_grouped=GROUPED)
    pytester.runpytest(*PLUGINS, "--faith-report", "serial").assert_outcomes(passed=4)
    parallel = pytester.runpytest_subprocess(*PLUGINS, "-p", "xdist", "-n", "2", "--dist", "loadgroup",
                                             "--faith-report", "par")
    parallel.assert_outcomes(passed=4)
    a = json.loads((pytester.path / "serial" / "scorecard.json").read_text())
    b = json.loads((pytester.path / "par" / "scorecard.json").read_text())
    ids = [r["test"] for r in b["results"]]
    assert ids == [r["test"] for r in a["results"]]
    assert all("@" not in i for i in ids), ids
