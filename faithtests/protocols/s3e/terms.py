"""What each S3E metric means, in plain words (the scorecard's glossary; ``faithtests explain``)."""

from __future__ import annotations

from faithtests.scorecard.glossary import GlossaryEntry, MetricAlias, MetricTerm

PAPER = "S3E"
_STATE = "1 - cosine of pre-answer hidden states"


def _excess(control: str, what: str) -> MetricTerm:
    return MetricTerm(
        f"Delta_{control}", f"On items answered right in both orders, how much further the pre-answer hidden "
        f"state moves for the meaning-changing foil than for {what}, at one frozen layer: a large value is "
        "internal stress hidden behind a correct answer.",
        "lower", _STATE, PAPER, "Eqs. 3-5")


def _effect(control: str) -> MetricTerm:
    return MetricTerm(f"d_p_{control}", f"Paired effect size of Delta_{control}: its mean over items divided "
                      "by its standard deviation.", "lower", "standard deviations", PAPER, "Eq. 8")


def _hsr(control: str) -> MetricTerm:
    return MetricTerm(f"HSR_correct_{control}", "Share of items answered right in both orders whose "
                      f"Delta_{control} exceeds the threshold tau = mean + sd (hidden stress).",
                      "lower", "share of strict-correct items", PAPER, "App. J")


TERMS: tuple[GlossaryEntry, ...] = (
    MetricTerm("AB_accuracy", "Share of A/B forced choices (true caption vs a meaning-changing foil) where "
               "the model picks the true caption, in one option order.",
               "higher", "share of stress trials", PAPER, "§5.1, Table 6"),
    MetricTerm("A_rate", "Share of forced choices answered 'A' in one option order: far from the share the "
               "answers call for, it shows position bias.",
               "none", "share of stress trials", PAPER, "§5.1"),
    MetricTerm("strict_correct", "Share of items where the model picks the true caption over the foil in "
               "both option orders.",
               "higher", "share of items", PAPER, "§5.1, Table 6"),
    _excess("lex", "a reworded caption with the same meaning (lexical control)"),
    _excess("pres", "a meaning-preserving rewrite"),
    _excess("rand", "a caption of another image"),
    _effect("lex"), _effect("pres"), _effect("rand"),
    _hsr("lex"), _hsr("rand"),  # App. J defines HSR for the lex and rand controls
    MetricTerm("top_half_band", "Mean hidden-state distance between the foil and the meaning-preserving "
               "rewrite over the top half of the layers.",
               "lower", _STATE, PAPER, "Eq. 7"),
    MetricTerm("Delta_lex_margin_matched", "Delta_lex on items matched by answer margin, so a confident and "
               "a hesitant model are compared like for like.",
               "lower", _STATE, PAPER, "Table 8"),
    MetricAlias("HSR", ("HSR_correct_lex", "HSR_correct_rand"),
                "the hidden stress rate (S3E Eqs. 6, 16; App. J), per control, on the strict-correct items"),
)
