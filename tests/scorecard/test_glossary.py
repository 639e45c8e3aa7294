"""The metric glossary (issue 33): every bundled term is well formed and unique, names resolve from any
recorded or displayed form, an undefined metric is marked, never dropped, shards keep their terms, and
``faithtests explain`` prints a definition or exits 2 with a did-you-mean."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from faithtests.cli import main
from faithtests.manifest import Manifest, glossary_aliases, glossary_terms
from faithtests.protocols import manifests
from faithtests.scorecard.glossary import (
    UNDEFINED,
    GlossaryError,
    MetricAlias,
    MetricTerm,
    base_name,
    collect,
    collect_aliases,
    did_you_mean,
    explain,
    for_recorded,
    lookup,
    merge_glossaries,
    term_for,
)
from faithtests.scorecard.model import MetricResult, TestRecord
from faithtests.scorecard.scorecard import Scorecard, merge_scorecards, read_scorecard, write_scorecard

TERM = MetricTerm("TBR", "Share of conflict answers that follow the text.", "lower", "ratio", "AC-Bench",
                  "Eq. 4")


@pytest.mark.parametrize("shown", ["TBR", "TBR[S-Opp]", "affective_conflict/TBR[S-Opp, mode=generation]",
                                   "affective_conflict/TBR[S-Opp] (cecs)", " TBR ", "TBR (cecs)",
                                   "s/TBR[a/b]"])
def test_base_name_strips_suite_slice_and_variant(shown: str) -> None:
    assert base_name(shown) == "TBR"


def test_term_round_trips_through_json_and_reads_any_decoration() -> None:
    glossary = {"TBR": TERM.to_json()}
    assert set(glossary["TBR"]) == {"sentence", "direction", "unit", "paper", "equation"}
    assert term_for("affective_conflict/TBR[S-Opp]", glossary) == TERM
    assert term_for("P_img", glossary) is None
    assert TERM.legend() == ("TBR: Share of conflict answers that follow the text (lower is better; "
                             "AC-Bench Eq. 4)")


@pytest.mark.parametrize("bad", [dict(name="X[a]"), dict(direction="up"), dict(sentence=" "),
                                 dict(name="s/X")])
def test_malformed_terms_are_refused(bad: dict[str, str]) -> None:
    fields = {"name": "X", "sentence": "An x.", "direction": "higher", "unit": "", "paper": "",
              "equation": ""} | bad
    with pytest.raises(GlossaryError):
        MetricTerm(**fields)


def test_one_name_defined_twice_differently_is_an_error() -> None:
    other = MetricTerm("TBR", "Something else.", "higher", "ratio", "X", "Eq. 1")
    assert collect([TERM, TERM]) == {"TBR": TERM}
    with pytest.raises(GlossaryError, match="'TBR' is defined twice"):
        collect([TERM, other])


def test_every_bundled_protocol_declares_a_loadable_glossary() -> None:
    bundled = [m for m in manifests() if m.fixtures.startswith("faithtests.protocols.")]
    assert len(bundled) >= 5
    assert all(m.glossary for m in bundled), [m.name for m in bundled if not m.glossary]
    terms = glossary_terms(bundled)  # raises on a malformed or twice-defined term
    assert len(terms) >= 80
    for term in terms.values():
        assert term.sentence.rstrip().endswith("."), term.name
        assert term.paper and term.equation and term.unit, term.name


def test_a_glossary_that_names_nothing_loadable_is_an_error() -> None:
    broken = Manifest(name="x", title="X", paper="", suites=(), fixtures="x", glossary="no.such.module:TERMS")
    with pytest.raises(GlossaryError, match="cannot be loaded"):
        glossary_terms([broken])


def test_an_undefined_metric_is_marked_not_dropped() -> None:
    glossary, missing = for_recorded(["TBR", "TBR", "planted_metric"], {"TBR": TERM})
    assert missing == ["planted_metric"]
    assert glossary["TBR"] == TERM.to_json()
    assert set(glossary["planted_metric"].values()) == {UNDEFINED}
    assert term_for("planted_metric", glossary) is None


def test_did_you_mean_is_case_insensitive_and_ranked() -> None:
    names = ["TBR", "E_inv", "E_inv_rel", "E_sens", "PR"]
    assert did_you_mean("tbr", names)[0] == "TBR"
    assert did_you_mean("E_in", names)[:2] == ["E_inv", "E_inv_rel"]
    assert did_you_mean("zzzzzz", names) == []
    with pytest.raises(GlossaryError, match="did you mean TBR"):
        explain("tbx", {"TBR": TERM})
    assert explain("x/TBR[S-Opp]", {"TBR": TERM}).splitlines()[1] == "  direction: lower is better"


def _card(metric: str, glossary: dict[str, dict[str, str]], index: int) -> Scorecard:
    r = MetricResult("s", f"s.py::t{index}", metric, 0.5)
    return Scorecard(fingerprint={"shard": {"index": index, "count": 2, "plan": "p"}},
                     tests=[TestRecord(r.test, "s", results=[r])], glossary=glossary)


def test_merged_shards_carry_every_definition(tmp_path: Path) -> None:
    undefined = {"TBR": dict.fromkeys(TERM.to_json(), UNDEFINED)}
    assert merge_glossaries([undefined, {"TBR": TERM.to_json()}]) == {"TBR": TERM.to_json()}
    merged = merge_scorecards([_card("TBR", {"TBR": TERM.to_json()}, 1),
                               _card("x", {"x": dict.fromkeys(TERM.to_json(), UNDEFINED)}, 2)])
    assert set(merged.glossary) == {"TBR", "x"}
    back = read_scorecard(write_scorecard(merged, tmp_path / "scorecard.json"))
    assert back.glossary == merged.glossary
    assert json.loads((tmp_path / "scorecard.json").read_text())["glossary"]["TBR"]["paper"] == "AC-Bench"


def test_explain_prints_a_definition(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "affective_conflict/TBR[S-Opp]"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("TBR: ") and "lower is better" in out and "AC-Bench Eq. 4" in out


def test_explain_unknown_name_exits_2_with_did_you_mean(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "tbx"]) == 2
    assert "did you mean TBR" in capsys.readouterr().err
    assert main(["explain", "DSS"]) == 2
    assert "did you mean DS or " in capsys.readouterr().err  # an alias is suggested too
    assert main(["explain"]) == 2


@pytest.mark.parametrize(("name", "metrics"), [
    ("DS", ["DS_exist", "DS_count"]), ("CECS", ["cecs_window_first", "cecs_mass_max_err", "delta_P_img"]),
    ("LSS", ["LSS_peak", "LSS_peak_layer", "LSS_window_mean"]),
    ("HSR", ["HSR_correct_lex", "HSR_correct_rand"]),
    ("cecs", ["cecs_steered_rate"]), ("tbr", ["TBR"]), ("lss_PEAK[S-Opp]", ["LSS_peak"])])
def test_explain_accepts_the_names_the_docs_use_in_any_case(name: str, metrics: list[str],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 49, item 6: ``explain DS / CECS / LSS / HSR`` (the README's and the papers' names) exited 2,
    and ``explain tbr`` did too: every metric each names is explained now."""
    assert main(["explain", name]) == 0
    out = capsys.readouterr().out
    assert all(f"\n{m}: " in f"\n{out}" for m in metrics), out


def test_bundled_aliases_name_declared_terms_and_bad_ones_are_refused() -> None:
    terms = glossary_terms(manifests())
    aliases = glossary_aliases(manifests())
    assert {"DS", "CECS", "LSS", "HSR"} <= set(aliases)
    assert all(m in terms for a in aliases.values() for m in a.metrics)
    assert isinstance(lookup("ds", terms, aliases), MetricAlias)
    with pytest.raises(GlossaryError, match="names undeclared metric"):
        collect_aliases([MetricAlias("X", ("TBR", "nope"), "x")], {"TBR": TERM})
    with pytest.raises(GlossaryError, match="also a metric's name"):
        collect_aliases([MetricAlias("tbr", ("TBR",), "x")], {"TBR": TERM})
    with pytest.raises(GlossaryError):
        MetricAlias("X", (), "names nothing")


def test_explain_all_lists_every_term(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", "--all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(glossary_terms(manifests()))
    assert any(line.startswith("E_inv: ") for line in lines)


def test_explain_reads_a_scorecards_own_terms(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    own = MetricTerm("tiny_score", "A tiny protocol's score.", "higher", "share", "Tiny", "Eq. 1")
    write_scorecard(Scorecard(glossary={"tiny_score": own.to_json()}), tmp_path / "scorecard.json")
    assert main(["explain", "tiny_score"]) == 2
    capsys.readouterr()
    assert main(["explain", "tiny_score", "--scorecard", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("tiny_score: A tiny protocol's score.")
