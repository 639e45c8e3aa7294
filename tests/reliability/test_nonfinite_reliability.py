"""A model whose outputs are NaN for some items (issue 16 item 11): the items are counted per test as
'non-finite score', the metrics use only the finite rows, and every check of the model fails with a
message for the user, never a bootstrap's error for suite authors.

Each test runs the suites in a subprocess as a user would, on a tiny open_clip (``open_clip:local-dir``)
whose token embedding of one word is NaN: every caption holding the word scores NaN, so exactly the
pairs with the word in either caption are broken.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 10
SEED = 0
BROKEN = ("its outputs are broken (an overflowing dtype such as float16, or bad weights), so no verdict "
          "can be given")
RULE = f"[coverage rule from {ROOT / 'suites' / 'thresholds.toml'}]"


def nan_word_open_clip(out_dir: Path, word: str | None) -> Path:
    """A tiny open_clip whose token embedding of ``word`` is NaN (of every token when ``word`` is None)."""
    import open_clip
    import torch
    from safetensors.torch import load_file, save_file

    from faithtests.testing.tiny_duals import build_tiny_open_clip

    out = build_tiny_open_clip(out_dir)
    weights = out / "open_clip_model.safetensors"
    state = load_file(str(weights))
    emb = state["token_embedding.weight"]
    if word is None:
        emb[:] = torch.nan
    else:
        emb[int(open_clip.get_tokenizer("ViT-B-32")([word])[0][1])] = torch.nan  # [SOT, word, EOT, ...]
    save_file(state, str(weights))
    return out


def run_lgip(tmp_path: Path, model: Path, tests: str) -> tuple[dict[str, Any], str]:
    """The scorecard and output of the LGIP suites on the reference world, first LIMIT images."""
    report = tmp_path / "report"
    cmd = [sys.executable, "-m", "pytest", "suites/test_invariance.py", "suites/test_flip_sensitivity.py",
           "-k", tests, "--faith-no-vlm-scorer", "--faith-model", f"open_clip:local-dir:{model}",
           "--faith-limit", str(LIMIT), "--faith-seed", str(SEED), "-p", "no:cacheprovider", "-q",
           "--faith-report", str(report)]
    proc = subprocess.run(cmd, cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True,
                          text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]  # test failures, no crash
    card: dict[str, Any] = json.loads((report / "scorecard.json").read_text())
    return card, out


def record_of(card: dict[str, Any], name: str) -> dict[str, Any]:
    tests: list[dict[str, Any]] = [t for t in card["tests"] if f"::{name}[" in t["test"]]
    (t,) = tests
    return t


def nonfinite(test: dict[str, Any]) -> dict[str, Any]:
    counts: list[dict[str, Any]] = [i for i in test["invalid"] if i["kind"] == "non-finite score"]
    (inv,) = counts
    return inv


def expected_broken(word: str) -> tuple[list[str], int, int, list[str], int]:
    """Item ids of the world's paraphrase + unrelated-caption pairs that hold ``word`` in either caption,
    their total, the paraphrase pairs without it, then the same ids and total of its flip pairs
    (independent of the suites' screening)."""
    from faithtests.protocols.lgip.perturb import pair_id
    from faithtests.protocols.lgip.separation import unrelated_pairs
    from faithtests.protocols.lgip.sources import world_workload

    wl = world_workload(LIMIT, seed=SEED)
    para = wl.of_family("paraphrase")
    invariance = [*para, *unrelated_pairs(para)]
    flips = wl.of_family("flip")

    def has(p: Any) -> bool:
        return any(re.search(rf"\b{word}\b", t.lower()) for t in (p.caption, p.perturbed))

    return ([pair_id(p) for p in invariance if has(p)], len(invariance), sum(not has(p) for p in para),
            [pair_id(p) for p in flips if has(p)], len(flips))


def message(spec: str, count: int, total: int, examples: list[str]) -> str:
    return (f"model {spec} produced non-finite outputs (NaN or inf) for {count} of {total} items "
            f"(e.g. {', '.join(examples[:3])}; kind 'non-finite score'): {BROKEN}")


def test_nan_for_some_captions_is_counted_and_fails_invariance_and_flips(tmp_path: Path) -> None:
    """NaN for every caption with "red": those pairs are counted, E_inv and PR use the rest, and the
    checks fail naming the model and the count, whatever the value on the finite rows."""
    model = nan_word_open_clip(tmp_path / "nan-red", "red")
    spec = f"open_clip:local-dir:{model}"
    card, out = run_lgip(tmp_path, model, "paraphrase_invariance and all or flip_positive_rate and world-all")
    inv_bad, inv_total, para_left, flip_bad, flip_total = expected_broken("red")
    assert 0 < len(inv_bad) < inv_total and 0 < len(flip_bad) < flip_total

    inv = record_of(card, "test_paraphrase_invariance")
    count = nonfinite(inv)
    assert (count["count"], count["total"], count["model"]) == (len(inv_bad), inv_total, spec)
    assert count["examples"] == inv_bad[:20]
    (e_inv,) = [r for r in inv["results"] if r["metric"] == "E_inv"]
    assert e_inv["passed"] is False and e_inv["n"] == para_left  # the finite pairs only
    assert inv["outcome"] == "failed"
    expected = (
        f"invariance/E_inv = {e_inv['value']:.3f} (95% CI {e_inv['ci'][0]:.3f}–{e_inv['ci'][1]:.3f}, "
        f"n={e_inv['n']}) {'passes' if e_inv['value'] <= 0.05 else 'fails'} <= 0.050 but has no verdict: "
        f"{message(spec, len(inv_bad), inv_total, inv_bad)} {RULE} [model={spec}, variant=base]")
    assert f"faithtests check failed: {expected}\n" in out  # the one-line reason
    assert expected.startswith(inv["message"])  # the scorecard keeps a shortened message

    flip = record_of(card, "test_flip_positive_rate")
    count = nonfinite(flip)
    assert (count["count"], count["total"]) == (len(flip_bad), flip_total)
    (pr,) = [r for r in flip["results"] if r["metric"] == "PR" and r["slice"] is None]
    assert pr["n"] == flip_total - len(flip_bad)  # the metrics use the finite pairs only
    assert f"{message(spec, len(flip_bad), flip_total, flip_bad)} {RULE}" in flip["message"]
    assert "count them as invalid before aggregating" not in out  # stats' message for suite authors
    assert f"coverage world: {len(inv_bad)} of {inv_total} inputs non-finite score" in out


EVERY = {"paraphrase_invariance and all": "test_paraphrase_invariance",
         "flip_positive_rate and world-all": "test_flip_positive_rate"}


@pytest.fixture(scope="module")
def every_nan(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any], str]:
    """(spec, scorecard, output) of one LGIP run selecting both tests of :data:`EVERY` on the model that
    is NaN for every token (one build and one session for the module's two tests)."""
    where = tmp_path_factory.mktemp("nan-every")  # no "all" in the path: -k reads it
    model = nan_word_open_clip(where / "model", None)
    card, out = run_lgip(where, model, " or ".join(f"({k})" for k in EVERY))
    assert sorted(t["test"].split("::")[1].split("[")[0] for t in card["tests"]) == sorted(EVERY.values())
    return f"open_clip:local-dir:{model}", card, out


@pytest.mark.parametrize("test", list(EVERY))
def test_nan_for_every_caption_fails_with_no_finite_pair(every_nan: tuple[str, dict[str, Any], str],
                                                         test: str) -> None:
    """NaN everywhere (say, float16 overflow): nothing to aggregate, so the checked metric is recorded
    undefined with n=0 and fails with the same message, instead of crashing on an empty bootstrap."""
    spec, card, out = every_nan
    (t,) = [t for t in card["tests"] if f"::{EVERY[test]}[" in t["test"]]
    count = nonfinite(t)
    assert count["count"] == count["total"] > 0
    where = "invariance/E_inv" if "invariance" in test else "flip_sensitivity/PR"
    assert t["outcome"] == "failed"
    broken = message(spec, count["total"], count["total"], count["examples"])
    expected = (
        f"{where} = undefined (n=0) no verdict: {broken}; n=0 < min_n 10 (too few items for a verdict) "
        f"{RULE} [model={spec}, variant=base]")
    assert f"faithtests check failed: {expected}\n" in out  # the one-line reason
    assert expected.startswith(t["message"])


# -- the VLM paths, in process: forced-choice logits / states (S3E) and letter logits (IMAVB) ------------
THRESHOLDS = """
[coverage]
min_valid_fraction = 0.5
min_n = 1

[flip]
AB_accuracy = { op = ">=", value = 0.5 }
"""


def vlm_faith(tmp_path: Path) -> Any:
    from faithtests.scorecard.recording import Faith
    from faithtests.scorecard.thresholds import load_thresholds

    path = tmp_path / "thresholds.toml"
    path.write_text(THRESHOLDS, encoding="utf-8")
    return Faith("suites/test_flip.py::test_x[world-vlm]", "flip", thresholds=load_thresholds(path),
                 model="vlm")


def test_s3e_nan_logits_and_inf_states_are_dropped_counted_and_fail_the_check(tmp_path: Path) -> None:
    """A record with NaN A/B logits is left out of the behaviour; with ``states=True`` a record with an
    infinite pre-answer state too. Both are counted, and the check fails with the user-facing message."""
    from types import SimpleNamespace

    import numpy as np

    from faithtests.protocols.s3e.fixtures import S3EData, finite_records
    from faithtests.scorecard.recording import FaithCheckFailed

    records = [SimpleNamespace(item_id=f"r{i}") for i in range(4)]
    logits = np.zeros((4, 2, 5, 2))
    logits[1, 1, 3, 0] = np.nan
    states = np.ones((3, 4, 2, 5, 8), dtype=np.float32)
    states[2, 2, 0, 0, 0] = np.inf
    data = S3EData(records, {}, logits, states, {})
    faith = vlm_faith(tmp_path)
    assert [r.item_id for r in finite_records(faith, data).records] == ["r0", "r2", "r3"]
    kept = finite_records(faith, data, states=True)
    assert [r.item_id for r in kept.records] == ["r0", "r3"]
    assert kept.logits.shape == (2, 2, 5, 2) and kept.states.shape == (3, 2, 2, 5, 8)
    assert [(i.kind, i.count, i.total, i.examples) for i in faith.record.invalid] == [
        ("non-finite score", 1, 4, ["r1"]), ("non-finite score", 2, 4, ["r1", "r2"])]
    faith.metric("AB_accuracy", 1.0, n=2)
    with pytest.raises(FaithCheckFailed) as e:
        faith.check("AB_accuracy")
    assert str(e.value) == (
        "flip/AB_accuracy = 1.000 (n=2) passes >= 0.500 but has no verdict: "
        f"{message('vlm', 1, 4, ['r1'])}; {message('vlm', 2, 4, ['r1', 'r2'])} "
        f"[coverage rule from {tmp_path / 'thresholds.toml'}] [model=vlm, variant=base]")


def test_s3e_all_nan_fails_with_no_record_left(tmp_path: Path) -> None:
    """Every record NaN (float16 overflow): the check fails on an undefined value with the same message."""
    from types import SimpleNamespace

    import numpy as np

    from faithtests.protocols import fail_unscored
    from faithtests.protocols.s3e.fixtures import S3EData, finite_records
    from faithtests.scorecard.recording import FaithCheckFailed

    nan = np.full((1, 2, 5, 2), np.nan)
    data = S3EData([SimpleNamespace(item_id="r0")], {}, nan, np.ones((1, 1, 2, 5, 2)), {})
    faith = vlm_faith(tmp_path)
    assert not finite_records(faith, data).records
    with pytest.raises(FaithCheckFailed) as e:
        fail_unscored(faith, "AB_accuracy", slice="orig")
    assert str(e.value) == (
        f"flip/AB_accuracy[orig] = undefined (n=0) no verdict: {message('vlm', 1, 1, ['r0'])}; n=0 < min_n 1 "
        f"(too few items for a verdict) [coverage rule from {tmp_path / 'thresholds.toml'}] "
        "[model=vlm, variant=base]")


def test_imavb_nan_letter_logits_are_dropped_and_counted(tmp_path: Path) -> None:
    """IMAVB: a record with NaN letter logits leaves the run and is counted as 'non-finite score' in the
    run's invalid counts (which every premise test records, so its checks fail)."""
    from types import SimpleNamespace

    import numpy as np

    from faithtests.protocols.imavb.fixtures import finite_run
    from faithtests.protocols.imavb.run import ChoiceRun

    logits = np.zeros((3, 2, 6))
    logits[2, 1, 4] = np.inf
    run = ChoiceRun([SimpleNamespace(item_id=f"s{i}") for i in range(3)], ("fixed", 0), logits,  # type: ignore[misc]
                    np.zeros((3, 2, 6), dtype=np.int64), np.ones((2, 3, 4), dtype=np.float32), total=3)
    kept = finite_run(run)
    assert [r.item_id for r in kept.records] == ["s0", "s1"]
    assert kept.logits.shape == (2, 2, 6) and kept.states is not None and kept.states.shape == (2, 2, 4)
    assert (kept.invalid, kept.examples, kept.total) == ({"non-finite score": 1},
                                                         {"non-finite score": ["s2"]}, 3)
