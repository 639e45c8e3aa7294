"""The ``faith`` recorder without pytest plumbing: metrics, checks and their messages, exemplars,
items, plots; the option helpers; and the atomic scorecard write."""

from __future__ import annotations

import base64
import io
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from faithtests.plugin.options import ModelSpec
from faithtests.scorecard.model import Series, TestRecord
from faithtests.scorecard.recording import (
    Faith,
    FaithCheckFailed,
    MissingThresholdError,
    items_key,
    thumbnail_data_uri,
)
from faithtests.scorecard.scorecard import Scorecard, read_scorecard, write_scorecard
from faithtests.scorecard.thresholds import Thresholds, load_thresholds


@pytest.fixture
def thresholds(tmp_path: Path) -> Thresholds:
    p = tmp_path / "t.toml"
    p.write_text(
        '[flip_sensitivity]\nPR = { op = ">=", value = 0.80, family = { siglip = 0.45 } }\n'
        '"PR[color]" = { op = ">=", value = 0.70 }\nE = { op = "<=", value = 0.1 }\n'
    )
    return load_thresholds(p)


def _faith(thresholds: Thresholds, **kw: Any) -> Faith:
    return Faith("suites/test_flip.py::test_pr[clip]", "flip_sensitivity", thresholds=thresholds, **kw)


def test_metric_records_labels_and_nan(thresholds: Thresholds) -> None:
    f = _faith(thresholds, model="clip")
    r = f.metric("PR", np.float32(0.5), ci=(np.float64(0.4), 0.6), n=np.int64(10))
    assert (r.value, r.ci, r.n, r.model, r.variant, r.suite) == (
        0.5,
        (0.4, 0.6),
        10,
        "clip",
        "base",
        "flip_sensitivity",
    )
    f.bind(variant="colorblind")
    nan = f.metric("PR", float("nan"), ci=(0.1, 0.2))
    assert nan.value is None and nan.ci is None and nan.variant == "colorblind"
    assert json.dumps(f.record.to_json(), allow_nan=False)  # JSON-safe
    with pytest.raises(ValueError, match="recorded twice"):
        f.metric("PR", 0.3)
    with pytest.raises(ValueError, match="not an interval"):
        f.metric("X", 0.3, ci=(0.5, 0.2))
    assert f.metric("Y", math.inf).value is None  # a broken model's output: undefined (fails any check)
    with pytest.raises(TypeError, match="must be a number"):
        f.metric("Z", "high")
    with pytest.raises(ValueError, match="brackets"):
        f.metric("PR[color]", 0.3)


def test_check_failure_message_is_exact(thresholds: Thresholds) -> None:
    f = _faith(thresholds, model="clip")
    f.metric("PR", 0.612, ci=(0.55, 0.67), n=240, slice="color")
    with pytest.raises(FaithCheckFailed) as info:
        f.check("PR", slice="color")
    assert str(info.value) == (
        "flip_sensitivity/PR[color] = 0.612 (95% CI 0.550–0.670, n=240) fails >= 0.700 (gate=point) "
        "[model=clip, variant=base]"
    )
    r = f.record.results[0]
    assert (r.threshold, r.op, r.passed, r.gate) == (0.70, ">=", False, "point")


def test_check_passes_and_config_wins_over_args(thresholds: Thresholds) -> None:
    f = _faith(thresholds)
    f.metric("PR", 0.85)
    r = f.check("PR", ">=", 0.99)  # the thresholds file defines PR: its 0.80 applies
    assert (r.passed, r.threshold) == (True, 0.80)
    f.metric("extra", 0.3, higher_is_better=False)
    r = f.check("extra", "<=", 0.5)  # not in the file: the explicit args apply
    assert (r.passed, r.op, r.threshold) == (True, "<=", 0.5)


def test_check_missing_threshold_names_suite_metric_files(thresholds: Thresholds) -> None:
    f = _faith(thresholds)
    f.metric("acc", 0.3)
    with pytest.raises(MissingThresholdError) as info:
        f.check("acc")
    msg = str(info.value)
    assert "'flip_sensitivity'" in msg and "'acc'" in msg and thresholds.files[0] in msg
    with pytest.raises(LookupError, match="check\\(\\) before metric\\(\\)"):
        f.check("never")


def test_ci_gate_uses_the_conservative_bound(thresholds: Thresholds) -> None:
    point, ci = _faith(thresholds), _faith(thresholds, gate="ci")
    for f in (point, ci):
        f.metric("PR", 0.85, ci=(0.75, 0.95), n=100)
        f.metric("E", 0.05, ci=(0.02, 0.12), higher_is_better=False)
        f.metric("noci", 0.85)
    assert point.check("PR").passed and point.check("E").passed
    with pytest.raises(FaithCheckFailed, match=r"gate=ci, bound 0\.750"):
        ci.check("PR")  # lower bound 0.75 < 0.80
    with pytest.raises(FaithCheckFailed,
                       match=r"fails <= 0\.100 \(gate=ci, bound 0\.120, inconclusive: the CI straddles"):
        ci.check("E")  # upper bound for <=
    # without a CI the point value is compared, and the result says so
    r = ci.check("noci", ">=", 0.8)
    assert (r.passed, r.gate) == (True, "point")


def test_undefined_value_never_passes(thresholds: Thresholds) -> None:
    f = _faith(thresholds)
    f.metric("PR", float("nan"))
    with pytest.raises(FaithCheckFailed, match=r"PR = undefined fails >= 0\.800"):
        f.check("PR")


def test_family_threshold_from_what_the_model_declares(thresholds: Thresholds) -> None:
    """The family comes from the adapter's declaration (in the role the test uses the model), from
    info the test recorded, or from an explicit bind; never from the label's tokens."""
    declared = {("ckpt", "scorer"): {"family": "SigLIP"}, ("ckpt", "vlm"): {"family": "llava"}}
    f = _faith(thresholds, model="ckpt", role="scorer", declared=declared)
    f.metric("PR", 0.5)
    r = f.check("PR")
    assert (r.passed, r.threshold) == (True, 0.45)
    v = _faith(thresholds, model="ckpt", role="vlm", declared=declared)  # same label, other role
    v.metric("PR", 0.5)
    with pytest.raises(FaithCheckFailed, match=r"fails >= 0\.800"):
        v.check("PR")
    tokens = _faith(thresholds, model="siglip-base", role="scorer", declared={})  # a label is not a family
    tokens.metric("PR", 0.5)
    with pytest.raises(FaithCheckFailed, match=r"fails >= 0\.800"):
        tokens.check("PR")
    g = _faith(thresholds, model="mine")
    g.model_info("mine", {"family": "SigLIP"})  # a model the test loaded itself
    g.metric("PR", 0.5)
    assert g.check("PR").threshold == 0.45
    h = _faith(thresholds, model="clip")
    h.bind(family="siglip")
    h.metric("PR", 0.5)
    assert h.check("PR").threshold == 0.45
    h.bind(model="other")  # a new model forgets the bound family
    h.metric("PR", 0.5)
    with pytest.raises(FaithCheckFailed, match=r"fails >= 0\.800"):
        h.check("PR")


def _png(path: Path, size: tuple[int, int]) -> Path:
    Image.new("RGB", size, (200, 30, 30)).save(path)
    return path


def test_exemplar_thumbnails_and_unreadable_images(tmp_path: Path) -> None:
    f = Faith("t", "s", max_exemplars=3, model="clip")
    bad = tmp_path / "corrupt.png"
    bad.write_bytes(b"not an image")
    kept = f.exemplars(
        [
            {
                "image": _png(tmp_path / "big.png", (640, 320)),
                "texts": {"caption": "a red box"},
                "scores": {"s": np.float32(0.25), "undef": float("nan")},
                "reason": "flip missed",
            },
            {"image": Image.new("RGB", (50, 60)), "image_b": tmp_path / "missing.png", "reason": "pair"},
            {"image": str(bad), "reason": "bad"},
            {"image": Image.new("RGB", (8, 8)), "reason": "beyond the cap"},
        ]
    )
    assert len(kept) == 3 and f.dropped_exemplars == 1 and len(f.record.exemplars) == 3
    first = kept[0]
    assert first.image is not None and first.image.startswith("data:image/jpeg;base64,")
    thumb = Image.open(io.BytesIO(base64.b64decode(first.image.split(",", 1)[1])))
    assert thumb.size == (128, 64)  # longest side 128, aspect kept
    assert first.scores == {"s": 0.25} and first.reason == "flip missed (non-finite scores: undef)"
    assert first.model == "clip" and first.texts == {"caption": "a red box"}
    assert kept[1].image is not None and kept[1].image_b is None
    assert kept[1].reason.startswith("pair (image_b unreadable: FileNotFoundError")
    assert kept[2].image is None and kept[2].reason.startswith("bad (image unreadable: ")
    assert json.dumps(f.record.to_json(), allow_nan=False)
    with pytest.raises(ValueError, match="unknown key"):
        Faith("t", "s").exemplars([{"img": "x", "reason": "typo"}])
    with pytest.raises(TypeError, match="PIL image, a path or an array"):
        thumbnail_data_uri(42)


def test_items_invalid_plot_model_info() -> None:
    f = Faith("t", "s")
    f.items("flips", {1: np.bool_(True), "b": 0.5})
    f.bind(model="clip")
    f.items("flips", {1: False})
    assert f.record.items == {"flips": {"1": True, "b": 0.5}, "flips | clip | base": {"1": False}}
    assert type(f.record.items["flips"]["1"]) is bool  # numpy bools stay bools (1.0 == True would hide it)
    assert items_key("x", "m", "v") == "x | m | v" and items_key("x") == "x"
    with pytest.raises(ValueError, match="recorded twice"):
        f.items("flips", {1: True})
    with pytest.raises(ValueError, match="NaN"):
        f.items("other", {"z": float("nan")})
    inv = f.invalid("unparseable", 2, total=10, examples=["ans: maybe"])
    assert (inv.count, inv.total, inv.model) == (2, 10, "clip")
    with pytest.raises(ValueError, match="count <= total"):
        f.invalid("x", 5, total=3)
    p = f.plot(
        "PR vs strength",
        series=[Series("clip", [0, 1, 2], [0.5, float("nan"), 0.7], lo=[0.4, 0.5, 0.6], hi=[0.6, 0.7, 0.8])],
    )
    assert p.series[0].y == [0.5, None, 0.7] and p.kind == "line"
    with pytest.raises(ValueError, match="2 y for 3 x"):
        f.plot("bad", series=[{"name": "a", "x": [0, 1, 2], "y": [1, 2]}])
    with pytest.raises(ValueError, match="kind"):
        f.plot("bad", kind="pie")
    f.model_info("clip", {"spec": "reference:clip", "sha256": "ab", "dir": Path("/x")})
    with pytest.raises(ValueError, match="model_info\\('bad'\\)"):
        f.model_info("bad", {"loss": float("nan")})
    rec = TestRecord.from_json(json.loads(json.dumps(f.record.to_json(), allow_nan=False)))
    assert rec.models == {"clip": {"spec": "reference:clip", "sha256": "ab", "dir": "/x"}}
    assert rec.plots[0].series[0].y == [0.5, None, 0.7]


@pytest.mark.parametrize(
    ("text", "label", "spec"),
    [
        ("reference:clip", "reference:clip", "reference:clip"),
        ("ckpt-0420=open_clip:local-dir:/x/y", "ckpt-0420", "open_clip:local-dir:/x/y"),
        ("hf:org/repo?rev=main", "hf:org/repo?rev=main", "hf:org/repo?rev=main"),
    ],
)
def test_model_spec_labels(text: str, label: str, spec: str) -> None:
    assert ModelSpec.parse(text) == ModelSpec(label, spec)


def test_failed_write_leaves_previous_scorecard_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "scorecard.json"
    write_scorecard(Scorecard(tests=[TestRecord("old", "s")]), path)
    before = path.read_bytes()

    def boom(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        write_scorecard(Scorecard(tests=[TestRecord("new", "s")]), path)
    monkeypatch.undo()
    assert path.read_bytes() == before and read_scorecard(path).tests[0].test == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scorecard.json"]  # no temp file left
    umask = os.umask(0o22)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # the umask's mode, not mkstemp's 0600
