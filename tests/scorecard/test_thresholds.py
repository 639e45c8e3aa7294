"""Thresholds: TOML parsing, user merge (unknown keys are errors), family and slice lookup."""

from __future__ import annotations

from pathlib import Path

import pytest

from faithtests.scorecard.thresholds import (
    ThresholdError,
    Thresholds,
    load_thresholds,
    metric_key,
    split_key,
)

DEFAULTS = """
[flip_sensitivity]
PR = { op = ">=", value = 0.80, family = { siglip = 0.45 } }
"PR[color]" = { op = ">=", value = 0.70 }
E_inv = { op = "<=", value = 0.10 }

[premise]
accuracy = { op = ">", value = 0.5 }
"""


def _write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


@pytest.fixture
def defaults(tmp_path: Path) -> Path:
    return _write(tmp_path, "defaults.toml", DEFAULTS)


def test_lookup_metric_slice_and_family(defaults: Path) -> None:
    th = load_thresholds(defaults)
    r = th.lookup("flip_sensitivity", "PR")
    assert r is not None and (r.op, r.value, r.family, r.key) == (">=", 0.80, None, "PR")
    # a slice with its own entry uses it ...
    r = th.lookup("flip_sensitivity", "PR", "color")
    assert r is not None and (r.value, r.key) == (0.70, "PR[color]")
    # ... a slice without one falls back to the metric-level threshold
    r = th.lookup("flip_sensitivity", "PR", "shape")
    assert r is not None and (r.value, r.key) == (0.80, "PR")
    # the first candidate family with its own value wins; case-insensitive
    r = th.lookup("flip_sensitivity", "PR", families=["hf", "SigLIP", "base"])
    assert r is not None and (r.value, r.family) == (0.45, "siglip")
    # a family only on the metric entry does not leak into the slice entry
    r = th.lookup("flip_sensitivity", "PR", "color", families=["siglip"])
    assert r is not None and (r.value, r.family) == (0.70, None)
    assert th.lookup("flip_sensitivity", "nope") is None
    assert th.lookup("nope", "PR") is None
    assert th.files == (str(defaults),)


def test_user_file_merges_over_defaults(tmp_path: Path, defaults: Path) -> None:
    user = _write(
        tmp_path,
        "user.toml",
        """
[flip_sensitivity]
PR = { value = 0.9, family = { clip = 0.85 } }
E_inv = 0.2
""",
    )
    th = load_thresholds(defaults, user)
    pr = th.entries("flip_sensitivity")["PR"]
    assert (pr.op, pr.value, dict(pr.family), pr.source) == (
        ">=",
        0.9,
        {"siglip": 0.45, "clip": 0.85},
        str(user),
    )
    e_inv = th.entries("flip_sensitivity")["E_inv"]
    assert (e_inv.op, e_inv.value) == ("<=", 0.2)
    # untouched entries keep their default and their source
    assert th.entries("flip_sensitivity")["PR[color]"].source == str(defaults)
    assert th.files == (str(defaults), str(user))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[flip_sensitivity]\nPRR = 0.9\n", "unknown metric key 'PRR' in suite [flip_sensitivity]"),
        ('[flip_sensitivity]\n"PR[colour]" = 0.9\n', "did you mean 'PR[color]'?"),
        ("[flip_sensitivty]\nPR = 0.9\n", "unknown suite 'flip_sensitivty'"),
        ("[flip_sensitivty]\nPR = 0.9\n", "did you mean 'flip_sensitivity'?"),
        ('[premise]\naccuracy = { op = "=>" }\n', "op '=>' is not one of"),
        ('[premise]\naccuracy = { value = "high" }\n', "value 'high' is not a finite number"),
        ("[premise]\naccuracy = { value = true }\n", "is not a finite number"),
        ("[premise]\naccuracy = { vlaue = 0.3 }\n", "unknown field(s) vlaue"),
        ('[premise]\naccuracy = { family = { x = "a" } }\n', "family.x: value 'a'"),
        ("premise = 3\n", "[premise] must be a table"),
        ("[premise\n", "not valid TOML"),
    ],
)
def test_user_file_errors_name_file_and_key(tmp_path: Path, defaults: Path, text: str, expected: str) -> None:
    user = _write(tmp_path, "user.toml", text)
    with pytest.raises(ThresholdError) as info:
        load_thresholds(defaults, user)
    assert expected in str(info.value)
    assert str(user) in str(info.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[s]\nm = 0.5\n", "needs { op"),
        ('[s]\nm = { op = ">=" }\n', "needs { op"),
        ('[s]\nm = { op = ">=", value = nan }\n', "not a finite number"),
        ('[s]\n"m[a][b]" = { op = ">=", value = 1 }\n', "is not 'metric' or 'metric[slice]'"),
    ],
)
def test_default_file_errors(tmp_path: Path, text: str, expected: str) -> None:
    p = _write(tmp_path, "d.toml", text)
    with pytest.raises(ThresholdError, match=None) as info:
        load_thresholds(p)
    assert expected in str(info.value) and str(p) in str(info.value)


def test_missing_files(tmp_path: Path, defaults: Path) -> None:
    # an absent default file is fine unless it was configured explicitly
    assert load_thresholds(tmp_path / "absent.toml").suites() == []
    with pytest.raises(ThresholdError, match="default thresholds file not found"):
        load_thresholds(tmp_path / "absent.toml", default_required=True)
    with pytest.raises(ThresholdError, match="thresholds file not found"):
        load_thresholds(defaults, tmp_path / "user-absent.toml")
    # without defaults every user key is unknown, and the message says why
    user = _write(tmp_path, "user.toml", "[premise]\naccuracy = 0.3\n")
    with pytest.raises(ThresholdError, match="no default thresholds file was loaded"):
        load_thresholds(None, user)


def test_keys_round_trip() -> None:
    assert split_key("PR[color]") == ("PR", "color")
    assert split_key("E_inv") == ("E_inv", None)
    assert metric_key("PR", "color") == "PR[color]" and metric_key("PR") == "PR"
    assert Thresholds().describe_files() == "no thresholds file"
