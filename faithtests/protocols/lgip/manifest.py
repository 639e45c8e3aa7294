"""LGIP, declared once: its suites, data name, options, resample count and world."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from faithtests.config import Option, Source
from faithtests.data.names import DataName
from faithtests.manifest import Manifest

#: ``--faith-lgip-bins`` values (``strength.BIN_SCHEMES``); the first is the default.
BIN_SCHEME_CHOICES = ("within-type", "paper", "pooled")
#: ``--faith-lgip-paraphrase-labels`` values (``paraphrase.PARAPHRASE_LABELS``); the first is the default.
PARAPHRASE_LABEL_CHOICES = ("markers", "provenance")


def _one_of(name: str, choices: tuple[str, ...]) -> Callable[[object, Source], str]:
    """A parser: the value (empty: the first choice), which must be one of ``choices``."""

    def parse(raw: object, source: Source) -> str:
        text = str(raw).strip() or choices[0]
        if text not in choices:
            raise pytest.UsageError(f"{name}: {text!r} is not one of {', '.join(choices)}")
        return text

    return parse


#: ``--faith-lgip-bins``: how flips are cut into weak / medium / strong (``strength.bin_flips``).
BINS = Option(
    "faith_lgip_bins",
    "LGIP strength bins: within-type (quartiles of each flip type, default), paper (the public script's "
    "Table 5 bins), pooled (quartiles of all flips)",
    default=BIN_SCHEME_CHOICES[0], choices=BIN_SCHEME_CHOICES,
    parse=_one_of("faith_lgip_bins", BIN_SCHEME_CHOICES), section="LGIP")
#: ``--faith-lgip-paraphrase-labels``: simple / advanced paraphrases by markers or by provenance.
PARAPHRASE_LABELS = Option(
    "faith_lgip_paraphrase_labels",
    "LGIP simple/advanced paraphrase labels: markers (the paper's template-marker rule, default) or "
    "provenance (how it was made)",
    default=PARAPHRASE_LABEL_CHOICES[0], choices=PARAPHRASE_LABEL_CHOICES,
    parse=_one_of("faith_lgip_paraphrase_labels", PARAPHRASE_LABEL_CHOICES), section="LGIP")

MANIFEST = Manifest(
    name="lgip",
    title="LGIP",
    paper="Language-Guided Invariance Probing of Vision-Language Models",
    suites=("invariance", "flip_sensitivity"),
    questions={
        "invariance": ("1", "does image–text similarity stay put under meaning-preserving paraphrases?"),
        "flip_sensitivity": ("2a", "does it drop under one-word semantic flips?")},
    fixtures="faithtests.protocols.lgip.fixtures",
    glossary="faithtests.protocols.lgip.terms:TERMS",
    data={"lgip": DataName("file", "LGIP perturbation JSONL (image paths relative to its folder)")},
    reads=("coco",),
    options=(BINS, PARAPHRASE_LABELS),
    bootstrap=10_000,
    world="faithtests.world.items:caption_items",
    # --faith-profile quick keeps the 64 world images: CLIP's PR[object] sits 0.04 above its paper gate
    # (0.838 vs 0.80), so at 24 images its CI crossed the gate (INSUFFICIENT) on seed 0; CLIP is cheap
    profile_limits={"quick": {"lgip": None}},
)
