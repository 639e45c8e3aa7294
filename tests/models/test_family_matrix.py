"""The family conformance matrix (issue 43): ``pytest suites/`` on every family's tiny checkpoint.

Each family of :data:`faithtests.testing.families.FAMILIES` is built offline with the suites' vocabulary
(so a prompt's words are tokens, not ``<unk>``), and all of them run every suite in two ``pytest
suites/`` runs (one per xdist group, so ``-n 2`` runs the halves side by side and each worker builds only
its half), each model under its ``model_type`` as its label, at ``--faith-limit 2``. Random weights FAIL
or are INSUFFICIENT; what must never happen is a test that ends in an exception instead of a verdict
or a *not applicable* with its reason. The rows measured are compared with the table in
``docs/models.md`` (:mod:`faithtests.testing.family_table`), which is therefore generated from this run:
``FAITH_WRITE_FAMILY_TABLE=1 pytest tests/models/test_family_matrix.py`` rewrites it.

The adapter checks against plain transformers (every method, prefix sharing against the full forward,
the stepped contrast, attention capture or its refusal) are ``test_vlm_families.py`` and
``test_ffn_contrast_hooks.py``, parametrised over the same families; the omni families' own checks are
``test_omni_families.py``.

Random weights never emit their EOS, so every generation would run to the protocol's limit (96 tokens for
SAGE's descriptions, 256 for IMAVB's A5): two thirds of the matrix's time, on text no verdict depends on.
Each build's ``generation_config.json`` therefore makes every token an EOS after :data:`STEPS` tokens
(``min_new_tokens``): generation still takes several cached decode steps (and SAGE several contrast
steps), which is what a family can break, and stops there. Measured: the larger half 127 s -> 58 s.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from faithtests.testing.families import FAMILIES, Family
from faithtests.testing.family_table import SUITES, WRITE_ENV, family_rows, measure, page_rows, write_rows

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "models.md"
LIMIT = 2
#: tokens every generation of the matrix's builds takes before it stops (module doc)
STEPS = 4
#: Seconds one family adds to its group (measured serially, one thread, on a busy 2-core machine: the
#: wall time from each of its tests' start to the next's, model loads and teardowns included, plus its
#: build; the run's fixed start-up is left out, each group pays it once). Since generation stops after
#: STEPS tokens an omni thinker costs about a VLM, Gemma 3n two to three (the old weights, 8 per omni
#: family to 1 per VLM, gave one group 16 families and the other 10: 71.6 s and 45.1 s in CI); a dual
#: encoder runs two suites; PaliGemma (no chat template) is all n/a but still loads. A family not listed
#: (a new one) costs :data:`KIND_COST` of its kind until it is measured.
COST = {
    "llava": 4.6, "llava_next": 4.5, "llava_onevision": 3.7, "qwen2_vl": 3.4, "qwen2_5_vl": 3.8,
    "qwen3_vl": 4.1, "qwen3_5": 6.0, "internvl": 2.8, "idefics3": 4.5, "smolvlm": 3.8, "gemma3": 3.7,
    "gemma4": 5.6, "paligemma": 4.3, "mllama": 3.3, "mistral3": 3.2, "glm4v": 3.3, "aya_vision": 4.3,
    "janus": 5.2, "lfm2_vl": 4.7, "qwen2_5_omni": 4.2, "qwen3_omni_moe": 4.6, "gemma3n": 10.2, "clip": 0.7,
    "siglip": 0.5, "siglip2": 0.5, "metaclip_2": 0.6,
}
KIND_COST = {"omni": 4.5, "vlm": 3.8, "dual": 0.6}


def _halves(families: list[Family]) -> tuple[list[Family], list[Family]]:
    """Two groups of about equal cost (dearest first into the cheaper group), each in FAMILIES order."""
    def cost(f: Family) -> float:
        return COST.get(f.model_type, KIND_COST[f.kind])

    groups: tuple[list[Family], list[Family]] = ([], [])
    for f in sorted(families, key=cost, reverse=True):
        min(groups, key=lambda g: sum(map(cost, g))).append(f)
    order = {f.model_type: i for i, f in enumerate(FAMILIES)}
    return (sorted(groups[0], key=lambda f: order[f.model_type]),
            sorted(groups[1], key=lambda f: order[f.model_type]))


#: the families whose own model runs, in two groups of about equal cost
GROUPS = _halves([f for f in FAMILIES if not f.broken])


def _build(families: list[Family], root: Path) -> dict[str, Path]:
    from faithtests.reference.tokenizer import world_vocab
    from faithtests.testing.families import builder

    words = list(world_vocab(lowercase=False))
    built = {f.model_type: builder(f.model_type)(root / f.model_type, words=words) for f in families}
    for family in families:
        if family.kind != "dual":
            _stop_after(built[family.model_type], STEPS)
    return built


def _stop_after(path: Path, steps: int) -> None:
    """Every token of the build's vocabulary an EOS once ``steps`` tokens are out (module doc); the
    processor's tokenizer gives the vocabulary, added tokens included."""
    from transformers import AutoTokenizer

    vocab = len(AutoTokenizer.from_pretrained(path, local_files_only=True))
    config = path / "generation_config.json"
    settings = json.loads(config.read_text()) if config.is_file() else {}
    config.write_text(json.dumps({**settings, "min_new_tokens": steps, "eos_token_id": list(range(vocab))}))


def _run(built: dict[str, Path], report: Path) -> dict[str, Any]:
    models: list[str] = []
    for family in (f for f in FAMILIES if f.model_type in built):
        option = "--faith-model" if family.kind == "dual" else "--faith-vlm"
        models += [option, f"{family.model_type}=hf:{built[family.model_type]}"]
    cmd = [sys.executable, "-m", "pytest", "suites/", "-p", "no:cacheprovider", "-q", *models,
           "--faith-limit", str(LIMIT), "--faith-allow-insufficient", "--faith-report", str(report)]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    if proc.returncode not in (0, 1):  # 1: random weights fail checks; anything else is a broken run
        raise AssertionError(f"exit {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-3000:]}")
    card: dict[str, Any] = json.loads((report / "scorecard.json").read_text())
    return card


@pytest.mark.whole_runs  # every suite on every family: CI's own step (tests/conftest.py)
@pytest.mark.parametrize("group", [pytest.param(i, marks=pytest.mark.xdist_group(f"family_matrix_{i}"))
                                   for i in range(len(GROUPS))])
def test_every_suite_runs_on_every_family(group: int, tmp_path: Path) -> None:
    families = GROUPS[group]
    card = _run(_build(families, tmp_path / "models"), tmp_path / "report")
    measured = measure(card, [f.model_type for f in families])
    crashes = [c for m in measured.values() for c in m.crashes]
    assert not crashes, "tests ended in an exception instead of a verdict:\n" + "\n".join(crashes)
    for family in families:
        got = measured[family.model_type]
        expected = ("invariance", "flip_sensitivity") if family.kind == "dual" else SUITES
        for suite in expected:  # every suite reached: a verdict, or not applicable with its reason
            assert got.verdicts.get(suite) or got.not_applicable.get(suite), (family.model_type, suite)
        assert all(why for reasons in got.not_applicable.values() for why in reasons), family.model_type
    rows = family_rows(measured)
    if os.environ.get(WRITE_ENV):
        write_rows(PAGE, rows)
    on_page = page_rows(PAGE)
    stale = {t: (on_page.get(t), r) for t, r in rows.items() if on_page.get(t) != r}
    diff = "\n".join(f"page: {a}\nrun:  {b}" for a, b in stale.values())
    assert not stale, (f"docs/models.md's family table differs from what the matrix measured (rewrite it "
                       f"with {WRITE_ENV}=1):\n{diff}")


@pytest.mark.parametrize("family", [f for f in FAMILIES if f.broken], ids=lambda f: f.model_type)
def test_a_broken_family_still_fails_in_transformers(family: Family, tmp_path: Path) -> None:
    """A family listed as not run fails in transformers itself (a plain forward of its tiny build):
    when a transformers release fixes it, this test fails, and the family joins the matrix."""
    import torch
    from transformers import AutoModelForImageTextToText

    from faithtests.testing.families import builder

    path = builder(family.model_type)(tmp_path / family.model_type)
    model = AutoModelForImageTextToText.from_pretrained(path, local_files_only=True)
    ids = torch.tensor([[1, 2, 3]])
    with pytest.raises(AttributeError, match="image_outputs"), torch.inference_mode():
        model(input_ids=ids, attention_mask=torch.ones_like(ids))
    if os.environ.get(WRITE_ENV):
        write_rows(PAGE, family_rows({family.model_type: None}))
    assert family.broken in page_rows(PAGE)[family.model_type]


def test_the_table_lists_every_family() -> None:
    assert list(page_rows(PAGE)) == [f.model_type for f in FAMILIES]
