"""Issue 48, "a bundled protocol is one folder", checked by doing it (docs/writing-suites.md, "Adding a
protocol"): in a copy of the repository, a toy protocol is added in exactly the places the docs name,
its folder ``faithtests/protocols/toyrank/``, one suite file, one table in ``suites/thresholds.toml`` and
one test folder, and the suites tables are regenerated (``python -m faithtests.catalog --write-docs``).
Then, in the copy: its suite runs on ``reference:clip`` and records R1 with a PASS from the shipped floor;
a user thresholds file above that value FAILS the same check; its option and its metric's glossary term
are picked up; the registry and docs tests that read every manifest pass; the site builds with its page
in the nav. Last, ``git status`` shows nothing changed outside those places: a hand-kept list anywhere
else that a new protocol must be added to fails this test.

The toy is real but small: 10 reference-world scenes (``faithtests.world.caption_items``), each with its
first caption, scored all against all by the scorer under test; R1 is the share of images whose own
caption scores strictly highest.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from _repo_copy import changed_paths, imported_from, run_in_copy, run_suite, tail

PROTOCOL = "faithtests/protocols/toyrank"
SUITE_FILE = "suites/test_self_retrieval.py"
TEST_FOLDER = "tests/protocols/toyrank"
IMAGES = 10  # --faith-toyrank-images: the option's default is 12, so n == 10 shows the option was read

TOY_FILES: dict[str, str] = {
    f"{PROTOCOL}/__init__.py": '''\
"""ToyRank (self-retrieval): does each image's own caption score highest among the captions of a small
set? The protocol on one page: README.md beside this file. This package stays empty, so registering its
fixtures at plugin load imports nothing else."""
''',
    f"{PROTOCOL}/manifest.py": '''\
"""ToyRank, declared once: its suite and question, its option, fixtures, glossary and world."""

from __future__ import annotations

import pytest

from faithtests.config import Option, Source
from faithtests.manifest import Manifest


def _images(raw: object, source: Source) -> int:
    text = str(raw).strip()
    if not text.isdigit() or int(text) < 2:
        raise pytest.UsageError(f"{source.label}: {text!r} is not a whole number >= 2")
    return int(text)


#: ``--faith-toyrank-images``: how many reference-world scenes rank each other's captions.
IMAGES = Option("faith_toyrank_images", "ToyRank: reference-world scenes whose captions are ranked "
                "(default 12)", default="12", parse=_images, metavar="N", section="ToyRank")

MANIFEST = Manifest(
    name="toyrank",
    title="ToyRank",
    paper="Self-retrieval of captions (a walkthrough protocol)",
    suites=("self_retrieval",),
    questions={"self_retrieval": ("6", "does each image's own caption score highest among the captions?")},
    fixtures="faithtests.protocols.toyrank.fixtures",
    glossary="faithtests.protocols.toyrank.terms:TERMS",
    options=(IMAGES,),
    bootstrap=1000,
    world="faithtests.world.items:caption_items",
)
''',
    f"{PROTOCOL}/terms.py": '''\
"""What each ToyRank metric means, in plain words (the scorecard's glossary; ``faithtests explain``)."""

from __future__ import annotations

from faithtests.scorecard.glossary import MetricTerm

PAPER = "ToyRank"

TERMS: tuple[MetricTerm, ...] = (
    MetricTerm("R1", "Share of images whose own caption scores strictly above every other image's caption "
               "(recall at 1 of image-to-text retrieval); ties count as failures.",
               "higher", "share of images", PAPER, "Eq. 1"),
)
''',
    f"{PROTOCOL}/metrics.py": '''\
"""ToyRank's metric, as pure functions: a score matrix in, numbers out."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray


def retrieved_at_1(scores: ArrayLike) -> NDArray[np.float64]:
    """Per image i (row): 1.0 when s(I_i, c_i) is strictly above every s(I_i, c_j), j != i, else 0.0 (a
    tie fails). ``scores[i, j]`` = s(I_i, c_j), a square matrix."""
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2 or s.shape[0] != s.shape[1] or s.shape[0] < 2:
        raise ValueError(f"retrieved_at_1: need a square matrix of 2 or more images, got shape {s.shape}")
    others = np.where(np.eye(len(s), dtype=bool), -np.inf, s)
    return (np.diag(s) > others.max(axis=1)).astype(np.float64)


def r_at_1(scores: ArrayLike) -> float:
    """R1 (Eq. 1): the mean of :func:`retrieved_at_1`."""
    return float(retrieved_at_1(scores).mean())
''',
    f"{PROTOCOL}/fixtures.py": '''\
"""ToyRank session fixtures (registered by the plugin from the manifest): reference-world caption scenes,
each with its first caption, scored all against all once per scorer. The scorer under test is the
plugin's ``faith_scorer`` fixture, requested by name; torch loads only when a fixture runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from faithtests.config import run_config
from faithtests.protocols.toyrank.manifest import IMAGES
from faithtests.world import caption_items

_IMAGES = pytest.StashKey[int]()
_SCORED = pytest.StashKey[dict[str, "Retrieval"]]()


@pytest.hookimpl(trylast=True)  # after the plugin has read the options (faithtests.plugin.options)
def pytest_configure(config: pytest.Config) -> None:
    config.stash[_IMAGES] = run_config(config).option(IMAGES)


@dataclass(frozen=True)
class Retrieval:
    """``scores[i, j]`` = s(image i, caption of image j) under one scorer."""

    ids: tuple[str, ...]
    captions: tuple[str, ...]
    scores: np.ndarray


def score_all(scorer: Any, images: list[Any], captions: list[str]) -> np.ndarray:
    """s(I_i, c_j) of every image and caption (the scorer's cache encodes each input once)."""
    n = len(images)
    flat = scorer.similarity([images[i] for i in range(n) for _ in range(n)], captions * n)
    return np.asarray(flat.double().numpy(), dtype=np.float64).reshape(n, n)


@pytest.fixture
def retrieval_scored(request: pytest.FixtureRequest, faith_scorer: Any) -> Retrieval:
    cache = request.config.stash.setdefault(_SCORED, {})
    if faith_scorer.spec not in cache:
        run = run_config(request.config)
        items = caption_items(run.capped(request.config.stash[_IMAGES], "toyrank"), run.seed)
        captions = [it.captions[0] for it in items]
        scores = score_all(faith_scorer, [it.image() for it in items], captions)
        cache[faith_scorer.spec] = Retrieval(tuple(it.item_id for it in items), tuple(captions), scores)
    return cache[faith_scorer.spec]
''',
    f"{PROTOCOL}/README.md": '''\
# ToyRank — self-retrieval (suite 6)

A walkthrough protocol: `tests/walkthrough/test_add_protocol.py` adds it to a copy of the repository.
Question: does each image's own caption score highest among the captions of a small set?

## Protocol
The reference world's caption scenes (`faithtests.world.caption_items`; `--faith-toyrank-images`, 12 by
default), each with its first caption; every image is scored against every caption once per scorer.

## The suite
**6. Self-retrieval** (`suites/test_self_retrieval.py`): R1 (Eq. 1), the share of images whose own
caption scores strictly above every other caption (ties fail), 95% bootstrap CI over images. Gate:
`R1 >= 0.5`, a floor (chance is one caption in the set).
''',
    SUITE_FILE: '''\
"""Suite 6 — self-retrieval (ToyRank, faithtests/protocols/toyrank/README.md). Every image of a few
reference-world scenes is scored against every scene's caption; R1 (Eq. 1) is the share of images whose
own caption scores strictly highest, CI by bootstrap over images. The numbers come from
``faithtests/protocols/toyrank/metrics.py``; this file records and checks them."""

from __future__ import annotations

import pytest

from faithtests.protocols.toyrank.fixtures import Retrieval
from faithtests.protocols.toyrank.metrics import retrieved_at_1
from faithtests.stats import bootstrap_ci

pytestmark = pytest.mark.suite("self_retrieval")


def test_own_caption_ranks_first(faith, retrieval_scored: Retrieval, faith_seed: int) -> None:
    hits = retrieved_at_1(retrieval_scored.scores)
    faith.metric("R1", float(hits.mean()), ci=bootstrap_ci(hits, n_resamples=1000, seed=faith_seed),
                 n=hits.size)
    faith.check("R1")
''',
    f"{TEST_FOLDER}/test_toyrank_metrics.py": '''\
"""ToyRank's R1 against hand-computed values."""

from __future__ import annotations

import pytest

from faithtests.protocols.toyrank.metrics import r_at_1, retrieved_at_1


def test_r1_by_hand() -> None:
    scores = [[0.9, 0.1, 0.2],   # its own caption first: a hit
              [0.5, 0.4, 0.0],   # another image's caption first: a miss
              [0.3, 0.3, 0.3]]   # a tie with its own: a miss
    assert retrieved_at_1(scores).tolist() == [1.0, 0.0, 0.0]
    assert r_at_1(scores) == pytest.approx(1 / 3)


def test_r1_needs_a_square_matrix() -> None:
    with pytest.raises(ValueError, match="square matrix"):
        r_at_1([[1.0, 0.0]])
''',
}

THRESHOLDS_TABLE = '''
# ---------------------------------------------------------------------------------------------------
[self_retrieval.R1]
# ToyRank Eq. 1. A floor: chance is one caption in the set (1/12 by default); reference:clip ranks every
# image's own caption first.
value = 0.5
kind = "floor"
means = "the scorer does not rank an image's own caption above the other images' captions"
'''

#: What a new protocol changes, and nothing else (the generated suites tables: faithtests.catalog)
GENERATED = {"README.md", "docs/index.md", "docs/suites.md"}
EXPECTED_CHANGES = {*TOY_FILES, "suites/thresholds.toml", *GENERATED}

#: The fast library tests that read every manifest (registry, glossary, thresholds, options, docs
#: tables, site nav, gate quotes, import contracts), and the new protocol's own tests, run in the copy.
#: tests/test_protocol_unit.py (a protocol registered by another distribution) is left out: 17 s.
REGISTRY_TESTS = (
    TEST_FOLDER,
    "tests/test_doc_tables.py",
    "tests/test_doc_gates.py",
    "tests/test_cli_list.py",
    "tests/test_readme_options.py",
    "tests/test_options_declared_once.py",
    "tests/test_architecture.py",
    "tests/scorecard/test_glossary.py",
    "tests/scorecard/test_declared_direction.py",
    "tests/scorecard/test_thresholds.py",
    "tests/scorecard/test_paper_rows.py",
    "tests/reliability/test_input_reliability.py::test_registry_names_every_suite_reader",
)


def add_toy_protocol(copy: Path) -> None:
    """Exactly the steps of docs/writing-suites.md, "Adding a protocol"."""
    for name, text in TOY_FILES.items():
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        (copy / name).write_text(text, encoding="utf-8")
    with (copy / "suites" / "thresholds.toml").open("a", encoding="utf-8") as f:
        f.write(THRESHOLDS_TABLE)


def toy_suite(copy: Path, report: Path, *extra: str) -> tuple[int, dict[str, Any], str]:
    """The toy suite on ``reference:clip`` in the copy: exit status, its R1 result, the terminal output."""
    status, r1, out = run_suite(copy, report, SUITE_FILE, "--faith-model", "reference:clip",
                                "--faith-toyrank-images", str(IMAGES), *extra,
                                suite="self_retrieval", metric="R1")
    assert r1["model"] == "reference:clip", r1
    return status, r1, out


def test_a_bundled_protocol_is_one_folder_a_suite_a_table_and_a_test_folder(repo_copy: Path,
                                                                            tmp_path: Path) -> None:
    copy = repo_copy
    assert imported_from(copy).is_relative_to(copy), "the copy must import its own faithtests"

    add_toy_protocol(copy)
    written = run_in_copy(copy, "faithtests.catalog", "--write-docs", timeout=60)
    assert written.returncode == 0, tail(written)
    assert {line.removeprefix("rewrote ") for line in written.stdout.splitlines()} == GENERATED

    # registered from its manifest alone: listed, explained, its option accepted and read (n == IMAGES)
    listed = run_in_copy(copy, "faithtests.catalog", "suites", timeout=60)
    rows = [line.split(None, 1) for line in listed.stdout.splitlines()]
    assert ["self_retrieval", "ToyRank: Self-retrieval of captions (a walkthrough protocol)"] in rows, tail(
        listed)
    explained = run_in_copy(copy, "faithtests.cli", "explain", "R1", timeout=60)
    assert explained.returncode == 0 and "higher is better" in explained.stdout, tail(explained)

    status, r1, _ = toy_suite(copy, tmp_path / "default")
    assert status == 0 and r1["verdict"] == "pass", r1
    assert (r1["n"], r1["op"], r1["threshold"], r1["gate_kind"]) == (IMAGES, ">=", 0.5, "floor"), r1
    assert r1["value"] >= 0.5 and r1["higher_is_better"] is True, r1

    # the gate is real: a user file raising the value above what the model got fails the same check
    above = round(r1["value"] + 0.01, 6)
    mine = tmp_path / "mine.toml"
    mine.write_text(f"[self_retrieval]\nR1 = {above}\n", encoding="utf-8")
    status, raised, out = toy_suite(copy, tmp_path / "raised", "--faith-thresholds", str(mine))
    assert status == 1 and raised["verdict"] == "fail", raised
    assert (raised["value"], raised["threshold"], raised["gate_kind"]) == (r1["value"], above, "user"), raised
    assert f"self_retrieval/R1 = {r1['value']:.3f}" in out and f"fails >= {above:.3f}" in out, out[-3000:]

    # every test that reads all manifests still passes with it (a hand-kept list of protocols fails here)
    tests = run_in_copy(copy, "pytest", *REGISTRY_TESTS, "-n", "0", "-p", "no:cacheprovider", "-q",
                        timeout=300)
    failed = [line for line in tests.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
    assert tests.returncode == 0, f"in the copy, with the new protocol: {failed}\n{tail(tests)}"

    # the site: its README is its page, the nav names it (no edit to mkdocs.yml: docs/hooks.py) and the
    # options reference lists its option
    site = tmp_path / "site"
    built = run_in_copy(copy, "mkdocs", "build", "--strict", "-q", "-d", str(site), timeout=120,
                        env={"NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 0, tail(built)
    assert (site / "protocols" / "toyrank" / "index.html").is_file()
    assert "ToyRank (suite 6)" in (site / "index.html").read_text(encoding="utf-8")
    assert "--faith-toyrank-images" in (site / "options" / "index.html").read_text(encoding="utf-8")

    changed = changed_paths(copy)
    assert changed == EXPECTED_CHANGES, (
        f"outside the protocol's places: {sorted(changed - EXPECTED_CHANGES)}; "
        f"not changed: {sorted(EXPECTED_CHANGES - changed)}")
