"""``--faith-cache``: a second run reads every model output back, records the same metrics, and the
scorecard says how many outputs came from the cache."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy  # noqa: F401  (inline runs restore sys.modules: heavy modules must be imported already)
import open_clip  # noqa: F401
import pytest
import torch  # noqa: F401
import transformers  # noqa: F401

PLUGINS = ("-p", "faithtests.plugin", "-p", "no:cacheprovider",
           "-p", "no:hypothesispytest", "-p", "no:anyio")

SUITE = """
from PIL import Image
from faithtests.models.interfaces import Prompt

IMAGES = [Image.new("RGB", (32, 32), c) for c in ("red", "blue", "white")]
TEXTS = ["a red square", "a blue square", "a white square"]

def test_scores(faith, faith_scorer):
    sims = faith_scorer.similarity(IMAGES, TEXTS)
    faith.metric("mean_similarity", float(sims.mean()), higher_is_better=True)

def test_decide(faith, faith_vlm):
    prompts = [Prompt(images=(im,), text=f"Is it {t}?\\nA. yes\\nB. no") for im, t in zip(IMAGES, TEXTS)]
    d = faith_vlm.decide(prompts, ("A", "B"))
    faith.metric("margin", float((d.logits[:, 0] - d.logits[:, 1]).mean()), higher_is_better=True)
"""


@pytest.fixture(autouse=True)
def _preloaded(load_tiny: Callable[..., Any]) -> None:
    import faithtests.models.vlm_scorer  # noqa: F401

    for name in ("open_clip", "llava"):
        load_tiny(name)


def _metrics(card: dict[str, Any]) -> dict[str, float]:
    return {f"{r['test']}:{r['metric']}": r["value"] for t in card["tests"] for r in t["results"]}


def _cold_then_warm(pytester: pytest.Pytester, tiny_dir: Callable[[str], Path],
                    run_pytest: Callable[..., pytest.RunResult]) -> tuple[list[Any], tuple[str, ...]]:
    """The suite run twice on one ``--faith-cache``: both scorecards, and the model options."""
    pytester.makepyfile(test_suite=SUITE)
    (pytester.path / "suites").mkdir()
    (pytester.path / "suites" / "thresholds.toml").write_text("")
    models = ("--faith-model", f"oc=open_clip:local-dir:{tiny_dir('open_clip')}",
              "--faith-vlm", f"llava=hf:{tiny_dir('llava')}")
    cards = []
    for run in ("cold", "warm"):
        result = run_pytest(*PLUGINS, *models, "--faith-cache", "cache", "--faith-report", run)
        result.assert_outcomes(passed=3)
        cards.append(json.loads((pytester.path / run / "scorecard.json").read_text()))
    return cards, models


def test_warm_run_reads_every_output_back(pytester: pytest.Pytester, tiny_dir: Callable[[str], Path]) -> None:
    cards, models = _cold_then_warm(pytester, tiny_dir, pytester.runpytest_inprocess)
    cold, warm = (c["fingerprint"]["models"] for c in cards)
    # 3 images + 3 texts + the 3 texts' token counts (the truncation check)
    assert cold["oc"]["output_cache"]["writes"] == 9 and cold["oc"]["output_cache"]["hits"] == 0
    assert warm["oc"]["output_cache"] == {**cold["oc"]["output_cache"], "hits": 9, "writes": 0}
    assert cold["llava"]["output_cache"]["writes"] > 0
    assert warm["llava"]["output_cache"]["writes"] == 0 and warm["llava"]["output_cache"]["hits"] > 0
    assert _metrics(cards[1]) == _metrics(cards[0]) and len(_metrics(cards[0])) == 3
    assert (pytester.path / "cache" / "outputs.sqlite3").is_file()

    # off by default: no cache counts in the fingerprint
    result = pytester.runpytest_inprocess(*PLUGINS, *models, "--faith-report", "off")
    result.assert_outcomes(passed=3)
    off = json.loads((pytester.path / "off" / "scorecard.json").read_text())["fingerprint"]["models"]
    assert "output_cache" not in off["oc"] and _metrics(cards[0]) == _metrics(
        json.loads((pytester.path / "off" / "scorecard.json").read_text()))


def test_ini_cache_dir_is_relative_to_the_rootdir(
    pytester: pytest.Pytester, tiny_dir: Callable[[str], Path]
) -> None:
    pytester.makepyfile(test_suite="def test_a(faith_scorer):\n    faith_scorer.encode_texts(['a cat'])\n")
    pytester.makeini("[pytest]\nfaith_cache = .faith-cache\n")
    (pytester.path / "sub").mkdir()
    result = pytester.runpytest_inprocess(
        *PLUGINS, "--faith-model", f"oc=open_clip:local-dir:{tiny_dir('open_clip')}", "--faith-report", "r")
    result.assert_outcomes(passed=1)
    assert (pytester.path / ".faith-cache" / "outputs.sqlite3").is_file()


HEAVY = """
import sys

def pytest_sessionfinish(session):
    heavy = ("open_clip", "torchvision", "transformers.models.auto.processing_auto")
    with open("imported.txt", "a") as f:
        f.write(",".join(m for m in heavy if m in sys.modules) + "\\n")
"""


def test_a_warm_run_loads_no_model(pytester: pytest.Pytester, tiny_dir: Callable[[str], Path]) -> None:
    """Through the plugin, in fresh processes: the cold run imports the models' stacks, the warm run
    (every output stored, each checkpoint described) imports none of them and gives the same metrics."""
    pytester.makeconftest(HEAVY)
    cards, _ = _cold_then_warm(pytester, tiny_dir, pytester.runpytest_subprocess)
    cold, warm = (pytester.path / "imported.txt").read_text().splitlines()
    assert cold.split(",") == ["open_clip", "torchvision", "transformers.models.auto.processing_auto"]
    assert warm == ""
    assert _metrics(cards[1]) == _metrics(cards[0])
    # what each run computed differs (the warm one computed nothing); the rest describes the models
    per_run = ("output_cache", "work")
    fingerprints = [{label: {k: v for k, v in info.items() if k not in per_run}
                     for label, info in c["fingerprint"]["models"].items()} for c in cards]
    assert fingerprints[0] == fingerprints[1]  # the deferred adapters describe the same models
    work = [c["fingerprint"]["models"]["llava"]["work"] for c in cards]
    assert work[0]["forwards"] > 0 and work[0]["image_inputs"] > 0
    assert work[1]["forwards"] == work[1]["image_inputs"] == 0


REPEATED = """
from PIL import Image
from faithtests.models.interfaces import Prompt

PROMPTS = [Prompt(images=(Image.new("RGB", (32, 32), c),), text=f"Is it {c}?\\nA. yes\\nB. no")
           for c in ("red", "blue", "white")]

def test_first(faith, faith_vlm):
    faith.metric("first", float(faith_vlm.decide(PROMPTS, ("A", "B")).logits.sum()))

def test_again(faith, faith_vlm, faith_output_store):
    logits = faith_vlm.decide(PROMPTS, ("A", "B")).logits
    faith.metric("again", float(logits.sum()))
    assert not faith_output_store.persistent
    assert faith_output_store.stats(faith_vlm.store_namespace).hits == 3
"""


def test_without_a_cache_a_session_serves_a_repeated_call_again(
        pytester: pytest.Pytester, tiny_dir: Callable[[str], Path]) -> None:
    """No ``--faith-cache``: the session keeps its outputs (``OutputStore(None)``), so a second
    test asking the same question gets the stored rows, equal to the first, and nothing is written to
    the run's folder or to the fingerprint."""
    pytester.makepyfile(test_suite=REPEATED)
    (pytester.path / "suites").mkdir()
    (pytester.path / "suites" / "thresholds.toml").write_text("")
    result = pytester.runpytest_inprocess(*PLUGINS, "--faith-vlm", f"llava=hf:{tiny_dir('llava')}",
                                          "--faith-report", "run")
    result.assert_outcomes(passed=2)
    card = json.loads((pytester.path / "run" / "scorecard.json").read_text())
    got = {k.split("::")[-1]: v for k, v in _metrics(card).items()}
    assert set(got) == {"test_first[llava]:first", "test_again[llava]:again"}, got
    assert got["test_first[llava]:first"] == got["test_again[llava]:again"]
    assert "output_cache" not in card["fingerprint"]["models"]["llava"]
    assert not list(pytester.path.rglob("*.sqlite3"))
