"""What each SPD-Faith metric means, in plain words (the scorecard's glossary; ``faithtests explain``)."""

from __future__ import annotations

from faithtests.scorecard.glossary import GlossaryEntry, MetricAlias, MetricTerm

PAPER = "SPD-Faith"
_PAIRS = "share of image pairs"
_SAGE = "§5.1, App. E, Table 6"


def _delta(name: str, of: str, direction: str) -> MetricTerm:
    return MetricTerm(f"delta_{name}", f"Change in {of} from the SAGE intervention, paired over the same "
                      "image pairs.", direction, "difference", PAPER, _SAGE)


TERMS: tuple[GlossaryEntry, ...] = (
    MetricTerm("contradiction_rate", "Share of image pairs where the model contradicts itself: it answers "
               "'yes' (or 'no') to both 'Are the two pictures the same?' and 'Are they different?'.",
               "lower", _PAIRS, PAPER, "Table 2"),
    MetricTerm("CR", "Consistency ratio of the two symmetric answers (consistent +1, contradictory -1, "
               "ambiguous +0.5), rescaled to 0-1.", "higher", "ratio (0-1)", PAPER, "Eqs. 12-13, Fig. 34"),
    MetricTerm("CR_clip", "CR rescaled to 0-1 by clipping negative values instead of shifting them.",
               "higher", "ratio (0-1)", PAPER, "Eqs. 12-13, Fig. 34"),
    MetricTerm("DS_exist", "Share of edited image pairs where the model says the pictures are not the same "
               "and are different: it notices that a difference exists.",
               "higher", "share of edited pairs", PAPER, "§3, Tables 3, 10"),
    MetricTerm("false_alarm_rate", "Share of identical image pairs where the model says the pictures are not "
               "the same and are different: a difference reported where there is none.",
               "lower", "share of identical pairs", PAPER, "§3 (identical-pair control)"),
    MetricTerm("yes_rate_same", "Share of pairs answered 'yes' to 'Are the two pictures the same?'.",
               "none", _PAIRS, PAPER, "Fig. 11"),
    MetricTerm("yes_rate_different", "Share of pairs answered 'yes' to 'Are the two pictures different?'.",
               "none", _PAIRS, PAPER, "Fig. 11"),
    MetricTerm("DQR", "Share of edited pairs where the model counts exactly as many differences as there are "
               "edits.", "higher", "share of edited pairs", PAPER, "Eq. 8"),
    MetricTerm("DS_count", "Difference score of the count: 1 - |counted - true| / true, floored at 0, "
               "averaged over edited pairs.", "higher", "score (0-1)", PAPER, "Eq. 9"),
    MetricTerm("DQR_code", "The public code's count ratio: counted differences / true edits, not capped "
               "(1 is right, above 1 over-counts).", "none", "ratio", PAPER, "public code"),
    MetricTerm("DQR_code_listed", "DQR_code with the count taken as the number of differences the reply "
               "lists.", "none", "ratio", PAPER, "public code"),
    MetricTerm("identical_counted_zero", "Share of identical image pairs where the model counts zero "
               "differences.", "higher", "share of identical pairs", PAPER, "App. B.2"),
    MetricTerm("TF1", "Micro-F1 of the edit types (colour / remove / position) the model names against the "
               "true edits.", "higher", "F1 (0-1)", PAPER, "Eq. 10"),
    MetricTerm("CF1", "Micro-F1 of the object categories the model names against the edited objects.",
               "higher", "F1 (0-1)", PAPER, "Eq. 11"),
    MetricTerm("CF1_code", "The public code's CF1: a named category counts each time if the pair's edits "
               "have it at all (can exceed 1).", "higher", "F1", PAPER, "public code"),
    MetricTerm("DRF", "Share of the differences the model claims that match a true edit (judged on type, "
               "category and attribute).", "higher", "share of claims", PAPER, "Eq. 15"),
    MetricTerm("cos_same_diff_last_layer", "Cosine between the last layer's pre-answer states of the "
               "'same?' and the 'different?' question on one pair.",
               "none", "cosine", PAPER, "App. D.3"),
    MetricTerm("cos_same_diff_min", "Lowest cosine over layers between the pre-answer states of the "
               "'same?' and the 'different?' question.", "none", "cosine", PAPER, "App. D.3"),
    _delta("contradiction_rate", "the contradiction rate", "lower"),
    _delta("CR", "the consistency ratio CR", "higher"),
    _delta("DS_count", "DS_count", "higher"),
    _delta("DRF", "DRF", "higher"),
    MetricTerm("pairs", "Number of image pairs the run used (per subset / difficulty).",
               "none", "pairs", PAPER, "App. A"),
    MetricTerm("edits", "Number of atomic edits of one type (colour, remove, position) over the pairs used.",
               "none", "edits", PAPER, "App. A"),
    # the names the README and the paper use (faithtests explain DS / SAGE)
    MetricAlias("DS", ("DS_exist", "DS_count"),
                "the paper names two quantities DS: §3's rate of noticing that an edited pair differs "
                "(Tables 3, 10) and App. B.2.1's count tolerance (Eq. 9)"),
    MetricAlias("SAGE", ("delta_contradiction_rate", "delta_CR", "delta_DS_count", "delta_DRF"),
                "the SAGE intervention (§5.1, App. E): its effects, paired over the same image pairs"),
)
