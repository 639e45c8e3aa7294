"""S3E, declared once: its suite, data names, resample count, world and training tasks."""

from __future__ import annotations

from faithtests.data.names import DataName
from faithtests.manifest import Manifest

MANIFEST = Manifest(
    name="s3e",
    title="S3E",
    paper="When Correct Decisions Hide Internal Stress: Decision-State Probing in Multimodal Language Models",
    suites=("flip_sensitivity",),
    questions={"flip_sensitivity": (
        "2b", "does a generative model pick the right caption in both A/B orders, and how far does its "
              "pre-answer state move under stress?")},
    fixtures="faithtests.protocols.s3e.fixtures",
    glossary="faithtests.protocols.s3e.terms:TERMS",
    data={
        "sugarcrepe": DataName("dir", "SugarCrepe folder of split JSONs",
                               needs=("coco", "the COCO images too: add --faith-data coco=DIR (its "
                                              "val2017/ holds the SugarCrepe images)")),
        "aro": DataName("dir", "ARO folder: visual_genome_relation.json and/or "
                               "visual_genome_attribution.json, images/",
                        contains=("visual_genome_relation.json", "visual_genome_attribution.json")),
        "winoground": DataName("dir", "Winoground folder: examples.jsonl, images/",
                               contains=("examples.jsonl",)),
    },
    reads=("coco",),  # SugarCrepe's images are COCO's val2017/
    bootstrap=10_000,
    world="faithtests.protocols.s3e.stimuli:s3e_records",
    training="faithtests.protocols.s3e.training:TASKS",
)
