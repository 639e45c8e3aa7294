"""Every gate of ``suites/thresholds.toml`` says its kind, and every paper gate gives each paper row it
quotes the verdict it claims (issue 44): the gate's op and value (the family's, for a row marked
``@FAMILY``) applied to the row's published value. A gate whose comment cited a failing model as a pass
(the old ``mis_v`` anchor: Qwen3-Omni's fixed-order 0.728 instead of its shuffled 0.435) fails here."""

from __future__ import annotations

from pathlib import Path

import pytest

from faithtests.protocols import load_suite_thresholds
from faithtests.scorecard.gate_kinds import KINDS, PaperRow, ThresholdError
from faithtests.scorecard.model import passes
from faithtests.scorecard.thresholds import Threshold, merge_user, parse_defaults

SHIPPED = Path(__file__).resolve().parents[2] / "suites" / "thresholds.toml"
THRESHOLDS = load_suite_thresholds(SHIPPED)
ENTRIES = [(suite, key, t) for suite in THRESHOLDS.suites() for key, t in THRESHOLDS.entries(suite).items()]
PAPER = [(f"{suite}/{key}", t, row) for suite, key, t in ENTRIES if t.kind == "paper" for row in t.rows]


@pytest.mark.parametrize(("where", "t"), [(f"{s}/{k}", t) for s, k, t in ENTRIES])
def test_every_gate_says_its_kind(where: str, t: Threshold) -> None:
    assert t.kind in KINDS, f"{where}: kind {t.kind!r}"
    kinds = {t.kind, *t.family_kind.values()}
    if "paper" in kinds:
        assert t.anchor and t.rows, f"{where}: a paper gate names its table and quotes its rows"
    if "floor" in kinds:
        assert t.means, f"{where}: a floor says what its failure means"


@pytest.mark.parametrize(("where", "t", "row"), PAPER,
                         ids=[f"{w}-{r.model}{'@' + r.family if r.family else ''}" for w, _, r in PAPER])
def test_paper_gate_gives_each_quoted_row_its_verdict(where: str, t: Threshold, row: PaperRow) -> None:
    value = t.family[row.family] if row.family else t.value
    got = passes(row.value, t.op, value)
    said = "pass" if row.passes else "fail"
    verdict = "passes" if got else "fails"
    assert got == row.passes, (f"{where} ({t.anchor}): {row.model} {row.value} {verdict} {t.op} {value}, "
                               f"but the file quotes it as a {said}")


def test_both_sides_are_quoted_where_the_paper_has_them() -> None:
    """A paper gate whose table has models on both sides quotes both (one side only: every row of that
    table passes, which the entry's comment says)."""
    one_sided = sorted(f"{s}/{k}" for s, k, t in ENTRIES
                       if t.kind == "paper" and len({r.passes for r in t.rows}) == 1)
    assert one_sided == [
        "affective_conflict/aligned_acc", "affective_conflict/image_only_acc",
        "affective_conflict/text_only_acc",
        "flip_sensitivity/AB_accuracy", "flip_sensitivity/Delta_lex", "flip_sensitivity/strict_correct",
        "premise_rejection/probe_margin", "premise_rejection/std_a", "premise_rejection/std_v",
    ], one_sided


@pytest.mark.parametrize(("spec", "expected"), [
    ({"op": ">=", "value": 0.5, "kind": "guess"}, "kind 'guess' is not one of paper, floor"),
    ({"op": ">=", "value": 0.5, "kind": "paper"}, "anchor"),
    ({"op": ">=", "value": 0.5, "kind": "paper", "anchor": "T1"}, "quotes its rows"),
    ({"op": ">=", "value": 0.5, "kind": "floor"}, "means"),
    ({"op": ">=", "value": 0.5, "kind": "floor", "means": "x", "pass": {"A": 0.6}}, "only a paper gate"),
    ({"op": ">=", "value": 0.5, "anchor": "T1"}, "go with a kind"),
    ({"op": ">=", "value": 0.5, "kind": "paper", "anchor": "T", "pass": {"A @siglip": 0.6}},
     "family 'siglip'"),
    ({"op": ">=", "value": 0.5, "kind": "paper", "anchor": "T", "pass": {"A": 0.6},
      "family_kind": {"siglip": "floor"}}, "family_kind must map families"),
])
def test_kind_errors_name_the_key(spec: dict[str, object], expected: str) -> None:
    with pytest.raises(ThresholdError, match=r"x.toml: \[s\] m") as err:
        parse_defaults({"s": {"m": spec}}, "x.toml")
    assert expected in str(err.value)


def test_a_user_value_is_kind_user() -> None:
    """A user file's value is no longer the default's anchor: the result says whose it is."""
    base = parse_defaults({"s": {"m": {"op": ">=", "value": 0.5, "kind": "floor", "means": "x"}}}, "d.toml")
    own = base.lookup("s", "m")
    assert own is not None and own.kind == "floor"
    got = merge_user(base, {"s": {"m": 0.6}}, "mine.toml").lookup("s", "m")
    assert got is not None and (got.kind, got.note, got.value) == ("user", "set in mine.toml", 0.6)
