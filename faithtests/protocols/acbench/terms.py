"""What each AC-Bench metric means, in plain words (the scorecard's glossary; ``faithtests explain``)."""

from __future__ import annotations

from faithtests.scorecard.glossary import GlossaryEntry, MetricAlias, MetricTerm

PAPER = "AC-Bench"
_CONFLICT = "conflict items (the image's emotion differs from the description's)"
_CECS = "§5.1, App. D.1"

TERMS: tuple[GlossaryEntry, ...] = (
    MetricTerm("P_img", f"Share of {_CONFLICT} where the answer is the image's emotion.",
               "higher", "share of conflict items", PAPER, "Eq. 1"),
    MetricTerm("P_txt", f"Share of {_CONFLICT} where the answer follows the description instead of the "
               "image.", "lower", "share of conflict items", PAPER, "Eq. 2"),
    MetricTerm("P_oth", f"Share of {_CONFLICT} where the answer is neither the image's nor the "
               "description's emotion.", "lower", "share of conflict items", PAPER, "Eq. 3"),
    MetricTerm("TBR", "Text bias ratio: of the conflict answers that follow either the image or the text, "
               "the share that follows the text, P_txt / (P_txt + P_img).",
               "lower", "ratio", PAPER, "Eq. 4"),
    MetricTerm("aligned_acc", "Accuracy on aligned items, where the image and the description express the "
               "same emotion.", "higher", "share of items", PAPER, "§4, Tables 1-2"),
    MetricTerm("image_only_acc", "Accuracy from the image alone (no description): the image's emotion "
               "must be recognisable for P_img to mean anything.",
               "higher", "share of images", PAPER, "App. C.1"),
    MetricTerm("text_only_acc", "Accuracy from the description alone (no image): the description's emotion "
               "must be recognisable for P_txt to mean anything.",
               "higher", "share of descriptions", PAPER, "App. C.1"),
    MetricTerm("LSS_peak", "Linguistic sink score at its peak layer: attention the answer pays to the "
               "description divided by attention it pays to the image.",
               "lower", "ratio of attention mass", PAPER, "Eq. 22"),
    MetricTerm("LSS_peak_layer", "The decoder layer where the linguistic sink score peaks.",
               "none", "layer index", PAPER, "Eq. 22, Figs. 8-9"),
    MetricTerm("LSS_window_mean", "Mean linguistic sink score over the layers CECS intervenes in.",
               "lower", "ratio of attention mass", PAPER, "Eq. 22, App. D.3"),
    MetricTerm("cecs_window_first", "First decoder layer of the CECS intervention window.",
               "none", "layer index", PAPER, _CECS),
    MetricTerm("cecs_window_last", "Last decoder layer of the CECS intervention window.",
               "none", "layer index", PAPER, _CECS),
    MetricTerm("cecs_mass_max_err", "Largest deviation from 1 of the sum of an attention row CECS changed: "
               "the reallocation must preserve attention mass (a correctness check).",
               "lower", "attention mass", PAPER, "Eq. 13"),
    MetricTerm("cecs_gate_closed_max_logprob_diff", "Largest change CECS makes to an answer's log-"
               "probability when its gate is closed (it must change nothing).",
               "lower", "log-probability", PAPER, _CECS),
    MetricTerm("cecs_gate_closed_max_lss_diff", "Largest change CECS makes to the linguistic sink score "
               "when its gate is closed (it must change nothing).",
               "lower", "ratio of attention mass", PAPER, _CECS),
    MetricTerm("conflict_score_mean", "Mean conflict score CECS reads from the model (the probability it "
               "says image and description disagree): high on conflict items, low on aligned ones.",
               "none", "probability", PAPER, "Eq. 5"),
    MetricTerm("cecs_steered_rate", "Share of items whose conflict score opens the CECS gate (s >= tau): "
               "wanted on conflict items, not on aligned ones.",
               "none", "share of items", PAPER, _CECS),
    MetricTerm("delta_P_img", "Change in P_img from CECS, paired over the same conflict items.",
               "higher", "difference of shares", PAPER, "Tables 2, 5"),
    MetricTerm("delta_aligned_acc", "Change in aligned-item accuracy from CECS, paired over the same items.",
               "higher", "difference of shares", PAPER, "Tables 2, 5"),
    # the names the README and the paper use (faithtests explain LSS / CECS)
    MetricAlias("LSS", ("LSS_peak", "LSS_peak_layer", "LSS_window_mean"),
                "the linguistic sink score (AC-Bench Eq. 22) at its peak layer and over the CECS window"),
    MetricAlias("CECS", ("cecs_window_first", "cecs_window_last", "cecs_mass_max_err",
                         "cecs_gate_closed_max_logprob_diff", "cecs_gate_closed_max_lss_diff",
                         "conflict_score_mean", "cecs_steered_rate", "delta_P_img", "delta_aligned_acc"),
                "the conflict-aware intervention (AC-Bench §5.1): its window, its correctness checks, its "
                "gate and its effects"),
)
