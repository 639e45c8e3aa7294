"""What each LGIP metric means, in plain words (the scorecard's glossary; ``faithtests explain``)."""

from __future__ import annotations

from faithtests.scorecard.glossary import MetricTerm

PAPER = "LGIP"

TERMS: tuple[MetricTerm, ...] = (
    MetricTerm("E_inv", "Mean absolute change of the image-caption score when the caption is reworded "
               "without changing its meaning: a faithful scorer barely moves.",
               "lower", "scorer units (cosine for dual encoders)", PAPER, "Eq. 2"),
    MetricTerm("E_inv_rel", "E_inv divided by how far the score drops for a true caption of another image "
               "(Delta_unrelated): rewording should move the score far less than a wrong caption does; "
               "undefined when that drop is not above zero.",
               "lower", "ratio", PAPER, "Eq. 2 over Eq. 4"),
    MetricTerm("Delta_unrelated", "Mean score drop from an image's own caption to a true caption of "
               "another image: how well the scorer separates captions at all.",
               "higher", "scorer units", PAPER, "Eq. 4 with a caption of another image"),
    MetricTerm("E_inv_rel_increase_pct", "How much larger E_inv is on the advanced (rule-rewritten) "
               "paraphrases than on the simple (template) ones, in percent.",
               "lower", "percent", PAPER, "§4.2, Table 4"),
    MetricTerm("PR", "Share of flips (one colour, number or object word swapped, or a SugarCrepe hard "
               "negative) where the scorer rates the original caption strictly above the flipped one; ties "
               "count as failures.",
               "higher", "share of flips", PAPER, "Eq. 5"),
    MetricTerm("E_sens", "Mean score gap between the original caption and its one-word flip: how much "
               "the scorer notices the wrong word.",
               "higher", "scorer units (cosine for dual encoders)", PAPER, "Eq. 4"),
    MetricTerm("PR_weighted", "PR with each flip weighted by its strength (type prior mixed with how far "
               "the flip moves the text embedding), so strong flips count more.",
               "higher", "share of flips (weighted)", PAPER, "§4.3"),
    MetricTerm("E_sens_weighted", "E_sens with each flip weighted by its strength, so strong flips count "
               "more.",
               "higher", "scorer units (weighted)", PAPER, "§4.3"),
)
