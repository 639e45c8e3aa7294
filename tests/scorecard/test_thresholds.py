"""Thresholds: TOML parsing, user merge (unknown keys are errors), family and slice lookup."""

from __future__ import annotations

from pathlib import Path

import pytest

from faithtests.protocols import load_suite_thresholds
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
        ("[s]\nm = 0.5\n", "needs { value"),
        ('[s]\nm = { op = ">=" }\n', "needs { value"),
        ("[s]\nm = { value = 0.5 }\n", "no op, and m has no glossary term"),
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


SLICED = """
[flip_sensitivity]
PR = { op = ">=", value = 0.70, family = { siglip = 0.55 }, slices = ["combined"] }
"PR[number]" = { op = ">=", value = 0.63 }

[difference]
DRF = { op = ">=", value = 0.25, slices = ["judge=*"] }
P_img = { op = ">=", value = 0.5 }
"""


@pytest.fixture
def sliced(tmp_path: Path) -> Path:
    return _write(tmp_path, "sliced.toml", SLICED)


def test_declared_slices_are_the_list_plus_own_entries(sliced: Path) -> None:
    th = load_thresholds(sliced)
    assert th.declared_slices("flip_sensitivity", "PR") == ("combined", "number")
    assert th.declared_slices("difference", "DRF") == ("judge=*",)
    assert th.declared_slices("difference", "P_img") == ()
    # a slice with its own default uses it (no family leak); a declared one without falls back
    r = th.lookup("flip_sensitivity", "PR", "number", families=["siglip"])
    assert r is not None and (r.value, r.key, r.family) == (0.63, "PR[number]", None)
    r = th.lookup("flip_sensitivity", "PR", "combined", families=["siglip"])
    assert r is not None and (r.value, r.key, r.family) == (0.55, "PR", "siglip")


def test_user_file_sets_declared_slices(tmp_path: Path, sliced: Path) -> None:
    user = _write(tmp_path, "user.toml", """
[flip_sensitivity]
"PR[number]" = 0.7
"PR[combined]" = { value = 0.8, family = { clip = 0.85 } }

[difference]
"DRF[judge=gpt-4o]" = 0.3
""")
    th = load_thresholds(sliced, user)
    r = th.lookup("flip_sensitivity", "PR", "number")
    assert r is not None and (r.op, r.value, r.key, r.source) == (">=", 0.7, "PR[number]", str(user))
    # a declared slice without a default entry starts as a copy of the metric's entry: op and families
    combined = th.entries("flip_sensitivity")["PR[combined]"]
    assert (combined.op, combined.value, dict(combined.family), combined.slices) == (
        ">=", 0.8, {"siglip": 0.55, "clip": 0.85}, ())
    r = th.lookup("flip_sensitivity", "PR", "combined", families=["clip"])
    assert r is not None and (r.value, r.key) == (0.85, "PR[combined]")
    # ... for that slice only: the metric and its other slices keep their defaults
    assert th.lookup("flip_sensitivity", "PR") == th.lookup("flip_sensitivity", "PR", "object")
    assert th.entries("flip_sensitivity")["PR"].value == 0.70
    r = th.lookup("difference", "DRF", "judge=gpt-4o")
    assert r is not None and (r.value, r.key) == (0.3, "DRF[judge=gpt-4o]")
    r = th.lookup("difference", "DRF", "judge=deterministic-v1")
    assert r is not None and (r.value, r.key) == (0.25, "DRF")


def test_new_slice_entry_starts_from_the_users_metric_entry(tmp_path: Path, sliced: Path) -> None:
    """Whatever the order in the file, a new slice entry copies the metric entry after the user's own
    metric-level changes."""
    user = _write(tmp_path, "user.toml", '[flip_sensitivity]\n"PR[combined]" = { family = { clip = 0.9 } }\n'
                  'PR = { op = ">", value = 0.75 }\n')
    combined = load_thresholds(sliced, user).entries("flip_sensitivity")["PR[combined]"]
    assert (combined.op, combined.value, dict(combined.family)) == (">", 0.75, {"siglip": 0.55, "clip": 0.9})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[flip_sensitivity]\n"PR[numbr]" = 0.6\n', "unknown slice 'numbr' of PR"),
        ('[flip_sensitivity]\n"PR[numbr]" = 0.6\n', "did you mean 'PR[number]'?"),
        ('[flip_sensitivity]\n"PR[type=number]" = 0.6\n', "did you mean 'PR[number]'?"),
        ('[flip_sensitivity]\n"PR[bin=weak]" = 0.6\n', "are 'PR[combined]', 'PR[number]'"),
        ('[difference]\n"P_img[subset=S-Op]" = 0.6\n', "P_img is checked only overall"),
        ('[difference]\n"DRF[jugde=x]" = 0.3\n', "unknown slice 'jugde=x' of DRF"),
        ('[difference]\n"DRF[judge=*]" = 0.3\n', "a key names one slice"),
        ('[difference]\n"DFR[judge=x]" = 0.3\n', "unknown metric key 'DFR[judge=x]'"),
        ('[difference]\n"DFR[judge=x]" = 0.3\n', "did you mean 'DRF'?"),
        ('[flip_sensitivity]\nPR = { slices = ["color"] }\n', "slices are declared by the default"),
    ],
)
def test_user_slice_typos_are_errors(tmp_path: Path, sliced: Path, text: str, expected: str) -> None:
    user = _write(tmp_path, "user.toml", text)
    with pytest.raises(ThresholdError) as info:
        load_thresholds(sliced, user)
    assert expected in str(info.value) and str(user) in str(info.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[s]\nm = { op = ">=", value = 1, slices = "a" }\n', "slices must be a list of slice names"),
        ('[s]\nm = { op = ">=", value = 1, slices = [""] }\n', "slices must be a list of slice names"),
        ('[s]\nm = { op = ">=", value = 1, slices = ["a[b]"] }\n', "must not contain brackets"),
        ('[s]\n"m[a]" = { op = ">=", value = 1, slices = ["b"] }\n', "belongs on the metric's own entry"),
        ('[s]\n"m[a*]" = { op = ">=", value = 1 }\n', "a key names one slice"),
    ],
)
def test_default_slice_declaration_errors(tmp_path: Path, text: str, expected: str) -> None:
    p = _write(tmp_path, "d.toml", text)
    with pytest.raises(ThresholdError) as info:
        load_thresholds(p)
    assert expected in str(info.value) and str(p) in str(info.value)


SHIPPED = Path(__file__).resolve().parents[2] / "suites" / "thresholds.toml"


def test_shipped_defaults_declare_exactly_the_checked_slices() -> None:
    """What the suites check on a slice (faith.check(..., slice=...)) is what a user file may set; the
    mirror is kept here (from the names the LGIP fixtures build slices with) so a new slice check, or a
    typo in the file, fails loudly."""
    from faithtests.protocols.acbench.records import CONFLICT_SUBSETS
    from faithtests.protocols.lgip.fixtures import (
        BIN_SCHEME_CHOICES,
        FLIP_CASES,
        PARAPHRASE_LABEL_CHOICES,
        STRENGTH_BINS,
        bin_slice,
        kind_slice,
    )

    th = load_suite_thresholds(SHIPPED, default_required=True)
    declared = {(s, m): set(th.declared_slices(s, m)) for s in th.suites()
                for m in {split_key(k)[0] for k in th.entries(s)}}
    kinds = {kind_slice(labels, k) for labels in PARAPHRASE_LABEL_CHOICES for k in ("simple", "advanced")}
    assert {k: v for k, v in declared.items() if v} == {
        ("invariance", "E_inv"): kinds,
        ("invariance", "E_inv_rel"): kinds,
        ("flip_sensitivity", "PR"): {c for c in FLIP_CASES if c != "all"}
        | {bin_slice(scheme, b) for scheme in BIN_SCHEME_CHOICES for b in STRENGTH_BINS},
        ("flip_sensitivity", "AB_accuracy"): {"orig", "swap"},
        ("premise_rejection", "Bal"): {"vision only"},
        ("premise_rejection", "rejection_gap"): {"vision", "audio"},
        ("affective_conflict", "P_img"): set(CONFLICT_SUBSETS),
        ("affective_conflict", "TBR"): set(CONFLICT_SUBSETS),
        ("difference_consistency", "false_alarm_rate"): {"subset=identical"},
        ("difference_consistency", "contradiction_rate"): {f"difficulty={d}"
                                                           for d in ("easy", "medium", "hard")},
        ("difference_consistency", "DS_exist"): {"subset=multi"},
        ("difference_consistency", "DS_count"): {"subset=multi"},
        ("difference_consistency", "DRF"): {"subset=multi, judge=*"},
    }


def test_shipped_pr_slice_defaults_and_no_floor_at_chance() -> None:
    th = load_suite_thresholds(SHIPPED, default_required=True)
    expected = {"number": 0.63, "color": 0.70, "object": 0.80, "combined": 0.70, "bin=weak": 0.52,
                "paper_bin=weak": 0.52, "pooled_bin=weak": 0.52, "paper_bin=strong": 0.85,
                "pooled_bin=strong": 0.85, "bin=medium": 0.70, "bin=strong": 0.70, "paper_bin=medium": 0.70,
                "pooled_bin=medium": 0.70}
    for sl, value in expected.items():
        r = th.lookup("flip_sensitivity", "PR", sl)
        assert r is not None and (r.key, r.value) == (f"PR[{sl}]", value)
    # the bins no paper table cuts (within-type, pooled) are floors; Table 5's bins are paper gates
    kinds = {sl: th.lookup("flip_sensitivity", "PR", sl).kind for sl in expected if "bin=" in sl}  # type: ignore[union-attr]
    assert kinds == {sl: "paper" if sl.startswith("paper_bin") else "floor" for sl in kinds}
    for sl in ("bin=medium", "bin=strong", "paper_bin=medium"):  # the siglip family value
        r = th.lookup("flip_sensitivity", "PR", sl, families=["siglip"])
        assert r is not None and (r.key, r.value) == (f"PR[{sl}]", 0.55)
    # strict PR: a coin flip gets 0.5, so no PR value or family value may be at or below it
    for key, t in th.entries("flip_sensitivity").items():
        if split_key(key)[0] == "PR":
            assert t.op == ">=" and min([t.value, *t.family.values()]) > 0.5, key
    r = th.lookup("flip_sensitivity", "PR", families=["siglip"])
    assert r is not None and (r.value, r.family) == (0.55, "siglip")
