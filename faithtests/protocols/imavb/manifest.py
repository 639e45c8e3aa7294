"""IMAVB, declared once: its suite, data name, option, resample count, world and training tasks."""

from __future__ import annotations

import pytest

from faithtests.config import Option, Source
from faithtests.data.names import DataName
from faithtests.manifest import Manifest

#: Frames sampled uniformly per IMAVB video: the paper's 50 (App. J) unless ``--faith-imavb-frames``.
IMAVB_FRAMES = 50


def parse_frames(text: str) -> int:
    """``"50"`` → 50; anything but a positive integer is a UsageError."""
    t = text.strip()
    if not t.isdigit() or int(t) <= 0:
        raise pytest.UsageError(f"--faith-imavb-frames: {text!r} is not a positive number of frames")
    return int(t)


def _frames(raw: object, source: Source) -> int:
    return parse_frames(str(raw))


#: ``--faith-imavb-frames``: frames per clip (a fingerprinted setting: it changes what is measured).
FRAMES = Option(
    "faith_imavb_frames",
    f"IMAVB video frames sampled uniformly per clip (default {IMAVB_FRAMES}, the paper's App. J)",
    default=str(IMAVB_FRAMES), parse=_frames, metavar="N", section="IMAVB")

MANIFEST = Manifest(
    name="imavb",
    title="IMAVB",
    paper="Senses Wide Shut: A Representation-Action Gap in Omnimodal LLMs",
    suites=("premise_rejection",),
    questions={"premise_rejection": ("3", "does the model reject a question whose premise contradicts what "
                                         "it sees or hears?")},
    fixtures="faithtests.protocols.imavb.fixtures",
    glossary="faithtests.protocols.imavb.terms:TERMS",
    data={"imavb": DataName("any", "IMAVB file or folder")},
    options=(FRAMES,),
    bootstrap=10_000,  # the paper's resamples over stimuli; one vectorised draw costs a few ms at 200
    world="faithtests.protocols.imavb.stimuli:premise_items",
    training="faithtests.protocols.imavb.training:TASKS",
    audio=True,  # the audio splits: a default run adds the bundled omni reference to this suite
    # --faith-profile quick: 48 world stimuli (reference:vlm's checks gave verdicts and passed on seeds
    # 0-9) and every clip (reference:omni's gated checks need its 100: at 24 its probe_margin fell to
    # 0.021 on seed 4, at 48 its audio rejection_gap to 0.097 on seed 9; floors 0.05 and 0.10, default
    # 0.215 and 0.20 [0.107, 0.29])
    profile_limits={"quick": {"imavb": 48, "imavb-clips": None}},
)
