"""What each IMAVB metric means, in plain words (the scorecard's glossary; ``faithtests explain``)."""

from __future__ import annotations

from faithtests.scorecard.glossary import GlossaryEntry, MetricAlias, MetricTerm

PAPER = "IMAVB"
_SPLITS = {
    "std_v": "standard vision questions (the premise is true; the answer is one of A-D)",
    "mis_v": "misleading vision questions (one visual premise detail is false; the right answer is E, "
             "'the visual detail in the question is incorrect')",
    "std_a": "standard audio questions (the premise is true; the answer is one of A-D)",
    "mis_a": "misleading audio questions (one audio premise detail is false; the right answer is F)",
}


def _split(name: str, what: str) -> tuple[MetricTerm, MetricTerm]:
    return (
        MetricTerm(name, f"Accuracy on {what}, averaged over three shuffles of the six options.",
                   "higher", "share of questions", PAPER, "§3, Table 1"),
        MetricTerm(f"{name}_shuffle_pm", f"Spread of {name} across option shuffles: the half-width of the "
                   "95% interval over shuffles (the ± of Table 1); large means the answer depends on option "
                   "order.",
                   "lower", "share of questions", PAPER, "Table 1 (±)"),
    )


def _pgla(name: str, sentence: str, direction: str, unit: str = "share of questions") -> MetricTerm:
    return MetricTerm(name, sentence, direction, unit, PAPER, "§5, Eqs. 5-6, App. G")


TERMS: tuple[GlossaryEntry, ...] = (
    *(t for name, what in _SPLITS.items() for t in _split(name, what)),
    MetricTerm("Bal", "Balanced accuracy: the mean of the standard-question and the misleading-question "
               "accuracies, so a model must both answer true premises and reject false ones.",
               "higher", "share of questions", PAPER, "Eq. 1"),
    MetricTerm("rejects_E_or_F", "Share of answers that reject the premise (option E or F): wanted on "
               "misleading questions, an over-rejection on standard ones.",
               "none", "share of answers", PAPER, "§3"),
    MetricTerm("rejection_gap", "How much more often a misleading question is rejected (E or F) than the "
               "standard question about the same stimulus, per modality: near 0 when rejections ignore the "
               "image or sound. The slice 'audio, speech premises' keeps the clips whose audio premise is "
               "about speech (recorded, not gated).", "higher", "difference of shares", PAPER,
               "§3 (splits of Table 1)"),
    MetricTerm("delta_Bal_vs_A1", "Change in Bal when the question is asked with another prompt (binary, "
               "chain of thought, warned, ...) instead of the default A1 prompt, paired over stimuli.",
               "higher", "difference of shares", PAPER, "App. C, I.1"),
    MetricTerm("probe_acc", "Held-out accuracy of a linear probe that tells misleading from standard "
               "questions from the model's hidden state, at the best layer.",
               "higher", "share of questions", PAPER, "Eq. 2, §4.3"),
    MetricTerm("l_star", "The decoder layer where the misleading-vs-standard probe is most accurate.",
               "none", "layer index", PAPER, "§4.3"),
    MetricTerm("text_tfidf_acc", "Accuracy of a TF-IDF classifier that tells misleading from standard "
               "questions from the question text alone: how much the wording gives away.",
               "lower", "share of questions", PAPER, "§4.3"),
    MetricTerm("text_sbert_acc", "Accuracy of a sentence-embedding classifier that tells misleading from "
               "standard questions from the question text alone.",
               "lower", "share of questions", PAPER, "§4.3"),
    MetricTerm("probe_acc_residualised", "Probe accuracy after removing from the hidden states everything "
               "a linear map can predict of the question text's embedding.",
               "higher", "share of questions", PAPER, "App. L"),
    MetricTerm("probe_margin", "How much better the hidden-state probe detects a false premise than the "
               "best text-only baseline (or chance): the model 'knows' more than it says.",
               "higher", "difference of accuracies", PAPER, "§4.3, Table 16"),
    MetricTerm("behaviour_mis_rejection", "Share of misleading questions the model actually rejects in its "
               "answer, beside what its probe detects.",
               "higher", "share of questions", PAPER, "§4.3"),
    MetricTerm("probe_misleading_share", "Share of misleading questions among the probe's items (its "
               "chance level is the larger of this and one minus it).",
               "none", "share of questions", PAPER, "§4.3, Table 16"),
    MetricTerm("probe_asymmetry", "Vision-grounded minus audio-grounded probe accuracy (each probe tells "
               "misleading from standard questions of its own modality, at its best layer): how much less "
               "the hidden states encode a false audio premise than a false visual one.",
               "none", "difference of accuracies", PAPER, "§4.3, Table 3"),
    MetricTerm("mis_gap_vision_minus_audio", "Misleading-question accuracy on vision minus on audio "
               "(mis_v - mis_a): how much more often a false visual premise is rejected than a false "
               "audio one.",
               "none", "difference of shares", PAPER, "Table 14 (Vision-Audio Gap)"),
    MetricTerm("lens_peak_P_correct", "Highest probability of the correct option over layers, reading each "
               "layer's state through the model's own output head (logit lens).",
               "higher", "probability", PAPER, "Eqs. 3-4"),
    _pgla("PGLA_delta_Bal", "Gain in Bal from the probe-gated logit adjustment (PGLA) on held-out "
          "questions, paired over stimuli.", "higher", "difference of shares"),
    _pgla("PGLA_std_cost", "Accuracy on standard questions lost by PGLA on held-out questions.", "lower",
          "difference of shares"),
    _pgla("PGLA_std", "Standard-question accuracy with PGLA under a standard-accuracy budget.", "higher"),
    _pgla("PGLA_mis", "Misleading-question accuracy with PGLA under a standard-accuracy budget.", "higher"),
    _pgla("PGLA_identity_folds", "Folds where no PGLA setting within the budget beat leaving the logits "
          "unchanged.", "none", "folds"),
    _pgla("PGLA_probe_acc", "Held-out accuracy of PGLA's gating probe (misleading vs standard).", "higher"),
    _pgla("PGLA_tune_test_gap", "Tuned Bal on the tuning folds minus held-out Bal: how much PGLA's "
          "settings overfit.", "lower", "difference of shares"),
    _pgla("PGLA_beta", "PGLA's offset beta: the mean gap between the E and F logits on standard training "
          "questions.", "none", "logits"),
    _pgla("PGLA_hook_max_abs_err", "Largest difference between PGLA applied through the model hook and "
          "the equations applied offline (a correctness check).", "lower", "logits"),
    MetricAlias("PGLA", ("PGLA_delta_Bal", "PGLA_std_cost", "PGLA_std", "PGLA_mis", "PGLA_identity_folds",
                         "PGLA_probe_acc", "PGLA_tune_test_gap", "PGLA_beta", "PGLA_hook_max_abs_err"),
                "the probe-gated logit adjustment (IMAVB §5): its effects, its settings and its checks"),
)
