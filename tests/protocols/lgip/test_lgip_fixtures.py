"""LGIP fixtures: each pair family of a workload is scored on its own (so under xdist paraphrases,
single-word flips and combined flips are separate model stages), once per (scorer, dataset, family)."""

from __future__ import annotations

from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from faithtests.config import RUN_CONFIG, RunConfig
from faithtests.protocols.lgip.fixtures import (
    BIN_SCHEME_CHOICES,
    PARAPHRASE_LABEL_CHOICES,
    _scored,
    _workload,
    bin_slice,
    kind_slice,
)
from faithtests.protocols.lgip.paraphrase import PARAPHRASE_LABELS
from faithtests.protocols.lgip.strength import BIN_SCHEMES


class CountingScorer:
    """A cosine scorer with deterministic embeddings that counts what it is asked to encode."""

    spec = "counting"
    score_kind = "cosine"
    batch_size = 16

    def __init__(self) -> None:
        self.texts: list[str] = []

    def _embed(self, keys: Sequence[str]) -> torch.Tensor:
        rows = [torch.tensor([float(len(k)), float(sum(map(ord, k)) % 97), 1.0]) for k in keys]
        return torch.nn.functional.normalize(torch.stack(rows), dim=-1)

    def encode_images(self, images: Sequence[Any]) -> torch.Tensor:
        return self._embed([str(im.size) for im in images])

    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor:
        self.texts += list(texts)
        return self._embed(texts)


def test_each_pair_family_is_scored_alone() -> None:
    config = SimpleNamespace(stash=pytest.Stash())
    config.stash[RUN_CONFIG] = RunConfig(limit=8)
    request: Any = SimpleNamespace(config=config)
    scorer = CountingScorer()
    whole = _workload(config, "world")  # type: ignore[arg-type]
    parts = {f: _scored(request, scorer, "world", f) for f in ("paraphrase", "flip", "combined")}
    for family, scored in parts.items():
        assert scored.workload.pairs and {p.family for p in scored.workload.pairs} == {family}
        assert len(scored.base) == len(scored.perturbed) == len(scored.workload.pairs)
    assert sum(len(s.workload.pairs) for s in parts.values()) == len(whole.pairs)
    # the flip stage never encodes a paraphrase-only text
    flips_only = {p.perturbed for p in parts["flip"].workload.pairs}
    paraphrases = {p.perturbed for p in parts["paraphrase"].workload.pairs} - flips_only
    asked = len(scorer.texts)
    assert _scored(request, scorer, "world", "flip") is parts["flip"] and len(scorer.texts) == asked
    fresh = CountingScorer()
    fresh.spec = "fresh"
    _scored(request, fresh, "world", "flip")
    assert not paraphrases & set(fresh.texts)


def test_option_choices_and_slices() -> None:
    """The options offer exactly the schemes the library knows (fixtures.py may not import numpy), the
    first being the default; each non-default choice gets slices of its own, so no baseline compares
    one binning or labelling with another."""
    assert BIN_SCHEME_CHOICES == BIN_SCHEMES and PARAPHRASE_LABEL_CHOICES == PARAPHRASE_LABELS
    assert [bin_slice(s, "weak") for s in BIN_SCHEMES] == ["bin=weak", "paper_bin=weak", "pooled_bin=weak"]
    assert [kind_slice(x, "simple") for x in PARAPHRASE_LABELS] == ["simple", "provenance=simple"]


OPTION_PROBE = """
def test_probe(lgip_bin_scheme, lgip_paraphrase_labels):
    print("SETTINGS", lgip_bin_scheme, lgip_paraphrase_labels)
"""
PLUGINS = ("-p", "faithtests.plugin", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:anyio",
           "-W", "ignore::pytest.PytestAssertRewriteWarning", "-s")


def test_options_from_command_line_and_ini(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_probe=OPTION_PROBE)
    pytester.runpytest(*PLUGINS).stdout.fnmatch_lines(["*SETTINGS within-type markers"])
    pytester.runpytest(*PLUGINS, "--faith-lgip-bins", "paper", "--faith-lgip-paraphrase-labels",
                       "provenance").stdout.fnmatch_lines(["*SETTINGS paper provenance"])
    pytester.makeini("[pytest]\nfaith_lgip_bins = pooled\n")
    pytester.runpytest(*PLUGINS).stdout.fnmatch_lines(["*SETTINGS pooled markers"])
    over = pytester.runpytest(*PLUGINS, "--faith-lgip-bins", "paper")  # the command line wins
    over.stdout.fnmatch_lines(["*SETTINGS paper markers"])
    pytester.makeini("[pytest]\nfaith_lgip_paraphrase_labels = rules\n")
    bad = pytester.runpytest(*PLUGINS)
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*faith_lgip_paraphrase_labels: 'rules' is not one of markers, provenance*"])
    wrong = pytester.runpytest(*PLUGINS, "--faith-lgip-bins", "global")
    assert wrong.ret == pytest.ExitCode.USAGE_ERROR
