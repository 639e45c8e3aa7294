"""Reliability corpus, inputs (engineer I): every ``--faith-data`` name is read or refused, every path option
is checked before any model loads (exit 4, one ``ERROR:`` line), bundled models join only a run that
names none, and user images are read correctly (16-bit, alpha, palette) or refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _usage import PLUGINS, minimal_project, usage_error
from PIL import Image

from faithtests.data.names import SHARED
from faithtests.manifest import data_table
from faithtests.protocols import manifests

#: Every --faith-data name, as the manifests declare them (a bundled protocol's new name joins here):
#: the help lists them shared names first, then each protocol's; an error message lists them sorted.
NAMES = list(data_table(manifests(), SHARED))
KNOWN = ", ".join(sorted(NAMES))


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return minimal_project(pytester)



def _loop(where: Path) -> Path:
    """A symlink loop: where/a -> where/b -> where/a."""
    (where / "a").symlink_to(where / "b")
    (where / "b").symlink_to(where / "a")
    return where / "a"


# -- item 1: every name is used or rejected ---------------------------------------------------------------
def test_misspelt_data_name_is_a_usage_error_with_did_you_mean(project: pytest.Pytester) -> None:
    (project.path / "x").mkdir()
    assert usage_error(project, "--faith-data", "cocoo=x") == (
        f"ERROR: --faith-data: unknown dataset 'cocoo' (did you mean 'coco'?); known: {KNOWN}")


def test_unknown_data_name_lists_the_known_ones(project: pytest.Pytester) -> None:
    assert usage_error(project, "--faith-data", "imagenet=x") == (
        f"ERROR: --faith-data: unknown dataset 'imagenet'; known: {KNOWN}")


def test_unknown_data_name_in_the_ini_file(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\nfaith_data = winogrand=data\n")
    assert usage_error(project) == (
        f"ERROR: --faith-data: unknown dataset 'winogrand' (did you mean 'winoground'?); known: {KNOWN}")


def test_sugarcrepe_without_coco(project: pytest.Pytester) -> None:
    assert usage_error(project, "--faith-data", "sugarcrepe=x") == (
        "ERROR: --faith-data sugarcrepe=... needs the COCO images too: add --faith-data coco=DIR (its "
        "val2017/ holds the SugarCrepe images)")


def test_registry_names_every_suite_reader() -> None:
    """One registry: each name's kind and its suites; every protocol fixture reads only registered names.
    The bundled names are pinned; a protocol bundled later registers its own from its manifest, with no
    edit here (tests/walkthrough/test_add_protocol.py)."""
    from faithtests.plugin.option_table import data_names
    from faithtests.protocols import manifests

    DATASETS = data_names()  # built from the protocols' manifests
    bundled = {
        "coco": ("dir", ("invariance", "flip_sensitivity", "difference_consistency")),
        "sugarcrepe": ("dir", ("flip_sensitivity",)),
        "lgip": ("file", ("invariance", "flip_sensitivity")),
        "aro": ("dir", ("flip_sensitivity",)),
        "winoground": ("dir", ("flip_sensitivity",)),
        "imavb": ("any", ("premise_rejection",)),
        "acbench": ("any", ("affective_conflict",)),
        "emoset": ("any", ("affective_conflict",)),
        "spdfaith": ("any", ("difference_consistency",)),
    }
    assert {n: (d.kind, d.suites) for n, d in DATASETS.items() if n in bundled} == bundled
    owned = {n: m.suites for m in manifests() for n in m.data}
    assert set(DATASETS) == set(bundled) | set(owned)  # every other name is a manifest's own
    assert all(DATASETS[n].suites == suites for n, suites in owned.items())
    import re

    root = Path(__file__).resolve().parents[2] / "faithtests" / "protocols"
    read = set()
    for f in root.glob("*/fixtures.py"):
        text = f.read_text()
        read |= set(re.findall(r'data\["(\w+)"\]', text))
        read |= set(re.findall(r'"(\w+)" in (?:run\.)?data', text))
    read |= {"aro", "winoground", "sugarcrepe"}  # S3E reads these through S3E_DATASETS
    assert read <= set(DATASETS), f"fixtures read unregistered data names: {sorted(read - set(DATASETS))}"
    assert set(bundled) <= read  # each bundled name has a reader


# -- item 2: every path is checked at configure time -----------------------------------------------------
def test_misspelt_shared_data_path(project: pytest.Pytester, shared_data: Path) -> None:
    assert usage_error(project, "--faith-data", f"coco={shared_data / 'coco-mni'}") == (
        f"ERROR: --faith-data coco: {shared_data.resolve() / 'coco-mni'} does not exist (did you mean "
        "'coco-mini'?)")


def test_data_file_where_a_folder_is_expected(project: pytest.Pytester, shared_data: Path) -> None:
    f = shared_data / "coco-mini" / "annotations" / "captions_val2017.json"
    assert usage_error(project, "--faith-data", f"coco={f}") == (
        f"ERROR: --faith-data coco: {f.resolve()} is a file; expected a folder")


def test_data_folder_where_a_file_is_expected(project: pytest.Pytester, shared_data: Path) -> None:
    assert usage_error(project, "--faith-data", f"lgip={shared_data / 'coco-mini'}") == (
        f"ERROR: --faith-data lgip: {(shared_data / 'coco-mini').resolve()} is a folder; expected a file")


@pytest.mark.parametrize(("name", "wanted", "what"), [
    ("coco", "annotations", "COCO folder with annotations/ and val2017/"),
    ("winoground", "examples.jsonl", "Winoground folder: examples.jsonl, images/"),
    ("aro", "visual_genome_relation.json or visual_genome_attribution.json",
     "ARO folder: visual_genome_relation.json and/or visual_genome_attribution.json, images/"),
])
def test_data_folder_without_what_its_loader_reads(project: pytest.Pytester, name: str, wanted: str,
                                                   what: str) -> None:
    (project.path / "empty").mkdir()
    assert usage_error(project, "--faith-data", f"{name}=empty") == (
        f"ERROR: --faith-data {name}: {project.path / 'empty'} has no {wanted} (expected: {what})")


def test_data_checked_before_any_model_loads(project: pytest.Pytester) -> None:
    """A bad path fails the run at configure time even when the named model could never load."""
    assert usage_error(project, "--faith-model", "hf:/nonexistent/model", "--faith-data", "coco=nope") == (
        f"ERROR: --faith-data coco: {project.path / 'nope'} does not exist")


# -- item 5: symlink loops in path options ----------------------------------------------------------------
PATH_OPTIONS = ("--faith-report", "--faith-baseline", "--faith-thresholds", "--faith-cache")


@pytest.mark.parametrize("option", PATH_OPTIONS)
def test_symlink_loop_in_a_path_option(project: pytest.Pytester, option: str) -> None:
    loop = _loop(project.path)
    assert usage_error(project, option, str(loop)) == f"ERROR: {option}: {loop} is a symlink loop"


def test_symlink_loop_below_a_path_option(project: pytest.Pytester) -> None:
    loop = _loop(project.path)
    assert usage_error(project, "--faith-report", str(loop / "out")) == (
        f"ERROR: --faith-report: {loop / 'out'} is a symlink loop")


def test_symlink_loop_in_a_data_path(project: pytest.Pytester) -> None:
    loop = _loop(project.path)
    assert usage_error(project, "--faith-data", f"coco={loop}") == (
        f"ERROR: --faith-data coco: {loop} is a symlink loop")


def test_symlink_loop_in_the_ini_cache(project: pytest.Pytester) -> None:
    loop = _loop(project.path)
    project.makeini("[pytest]\nfaith_cache = a\n")
    assert usage_error(project) == f"ERROR: ini faith_cache: {loop} is a symlink loop"


# -- item 1: the loaders are wired in ---------------------------------------------------------------------
def _png(path: Path, value: int = 120) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), (value, value, value)).save(path)


def _aro(root: Path) -> Path:
    items = [{"image_path": f"im{i}.png", "bbox_x": 0, "bbox_y": 0, "bbox_w": 4, "bbox_h": 4,
              "true_caption": f"the horse is left of the tree {i}",
              "false_caption": f"the tree is left of the horse {i}", "relation_name": "left of"}
             for i in range(3)]
    root.mkdir()
    (root / "visual_genome_relation.json").write_text(json.dumps(items))
    for i in range(3):
        _png(root / "images" / f"im{i}.png", 40 * i)
    return root


def _winoground(root: Path) -> Path:
    root.mkdir()
    rows = [{"id": i, "image_0": f"ex_{i}_0", "image_1": f"ex_{i}_1", "caption_0": f"a dog bites a man {i}",
             "caption_1": f"a man bites a dog {i}", "tag": "Object", "secondary_tag": "",
             "num_main_preds": 1, "collapsed_tag": "Object"} for i in range(2)]
    (root / "examples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for i in range(2):
        for k in (0, 1):
            _png(root / "images" / f"ex_{i}_{k}.png", 50 + 100 * k)
    return root


S3E_PROBE = """
from faithtests.protocols.s3e.fixtures import _s3e_records

def test_records(request):
    records, images, excluded = _s3e_records(request.config)
    sources = sorted({r.source for r in records})
    print("SOURCES", sources, "N", {s: sum(r.source == s for r in records) for s in sources}, excluded)
    for r in records:
        assert images[r.item_id]().mode == "RGB"
"""


@pytest.mark.parametrize(("name", "build", "n"), [("aro", _aro, 3), ("winoground", _winoground, 4)])
def test_forced_choice_data_joins_s3e(project: pytest.Pytester, name: str, build: Any, n: int) -> None:
    """``aro=`` / ``winoground=`` feed S3E's forced choice (suite 2b) beside the world's records."""
    build(project.path / name)
    project.makepyfile(test_a=S3E_PROBE)
    result = project.runpytest(*PLUGINS, "-s", "--faith-limit", "4", "--faith-data", f"{name}={name}")
    result.assert_outcomes(passed=1)
    assert f"SOURCES ['{name}', 'world'] N {{'{name}': {n}, 'world': 4}}" in result.stdout.str()


LGIP_PROBE = """
def test_inv(invariance_data):
    pass

def test_flip(flip_data, flip_family, flip_case):
    pass

def test_bins(flip_data, flip_family, strength_bin):
    pass
"""


def _lgip(root: Path, combined: bool) -> Path:
    row: dict[str, Any] = {"image_id": 1, "image_path": "a.png", "orig_captions": ["a red bus near two dogs"],
                           "same_caps": {"0": ["a photo of a red bus near two dogs"]},
                           "diff_caps": {"0": [{"text": "a blue bus near two dogs", "flip_type": "color"}]}}
    if combined:
        row["combined_caps"] = {"0": [{"text": "a photo of a blue bus near two dogs",
                                       "combined_type": "para+color"}]}
    _png(root / "a.png")
    (root / "lgip.jsonl").write_text(json.dumps(row) + "\n")
    return root / "lgip.jsonl"


def test_lgip_file_joins_invariance_and_flips(project: pytest.Pytester) -> None:
    _lgip(project.path, combined=True)
    project.makepyfile(test_a=LGIP_PROBE)
    result = project.runpytest(*PLUGINS, "--collect-only", "-q", "--faith-data", "lgip=lgip.jsonl")
    ids = [line.split("::", 1)[1] for line in result.outlines if "::" in line]
    assert "test_inv[lgip]" in ids and "test_flip[lgip-all]" in ids and "test_flip[lgip-combined]" in ids
    assert "test_bins[lgip-weak]" in ids and "test_flip[lgip-color]" not in ids  # file types are slices


def test_lgip_file_without_combined_flips_says_so(project: pytest.Pytester) -> None:
    _lgip(project.path, combined=False)
    project.makepyfile(test_a=LGIP_PROBE)
    result = project.runpytest(*PLUGINS, "-rs", "-k", "lgip", "--faith-data", "lgip=lgip.jsonl")
    result.assert_outcomes(passed=5, skipped=1)
    assert ("SKIPPED [1] test_a.py: --faith-data lgip: the file has no combined flips (combined_caps)"
            in result.stdout.lines)


def test_lgip_workload_scores_the_stored_pairs(tmp_path: Path) -> None:
    from faithtests.protocols.lgip.sources import lgip_workload

    wl = lgip_workload(_lgip(tmp_path, combined=True))
    assert [(p.family, p.label, p.perturbed) for p in wl.pairs] == [
        ("paraphrase", "simple", "a photo of a red bus near two dogs"),
        ("flip", "color", "a blue bus near two dogs"),
        ("combined", "color", "a photo of a blue bus near two dogs")]
    assert wl.images["1"]().size == (8, 8) and wl.name == "lgip" and not wl.missing


# -- item 3: bundled defaults only when no model is named ------------------------------------------------
VLM_AND_SCORER = "def test_v(faith_vlm):\n    pass\n\ndef test_s(faith_scorer):\n    pass\n"


def test_naming_a_scorer_drops_the_bundled_vlm(project: pytest.Pytester) -> None:
    project.makepyfile(test_a=VLM_AND_SCORER)
    result = project.runpytest(*PLUGINS, "-rs", "-k", "test_v", "--faith-model", "mine=reference:clip")
    result.assert_outcomes(skipped=1, deselected=1)
    assert ("SKIPPED [1] test_a.py: no --faith-vlm named (the bundled reference:vlm runs only when no "
            "--faith-model and no --faith-vlm is named)") in result.stdout.lines
    ids = project.runpytest(*PLUGINS, "--collect-only", "-q", "--faith-model", "mine=reference:clip").outlines
    assert [x for x in ids if "::" in x] == ["test_a.py::test_v[none]", "test_a.py::test_s[mine]"]


def test_naming_a_vlm_drops_the_bundled_scorer(project: pytest.Pytester) -> None:
    project.makepyfile(test_a=VLM_AND_SCORER)
    ids = project.runpytest(*PLUGINS, "--collect-only", "-q", "--faith-vlm", "v=reference:vlm").outlines
    assert [x for x in ids if "::" in x] == ["test_a.py::test_v[v]", "test_a.py::test_s[v]"]


def test_no_model_named_runs_both_bundled(project: pytest.Pytester) -> None:
    project.makepyfile(test_a=VLM_AND_SCORER)
    ids = project.runpytest(*PLUGINS, "--collect-only", "-q").outlines
    assert [x.split("::")[1] for x in ids if "::" in x] == [
        "test_v[reference:vlm]", "test_s[reference:clip]", "test_s[reference:vlm]"]


def test_help_states_the_default_rule(project: pytest.Pytester) -> None:
    out = " ".join(project.runpytest(*PLUGINS, "--help").stdout.str().split())
    rule = ("default: the bundled reference:clip and reference:vlm, only when no --faith-model and no "
            "--faith-vlm is named: naming any model drops all bundled defaults")
    assert f"image-text scorer to test, [LABEL=]SPEC; repeatable ({rule}) (ini: faith_model)" in out
    assert f"vision-language model to test, [LABEL=]SPEC; repeatable ({rule}) (ini: faith_vlm)" in out
    assert f"NAME is one of {', '.join(NAMES)}" in out
    assert {"coco", "lgip", "imavb", "acbench", "spdfaith"} <= set(NAMES)  # the list is read, not empty


# -- item 4: images read correctly or refused (unit cases in tests/data/test_images.py) -------------------
def test_16bit_png_through_a_loader_is_not_white(tmp_path: Path) -> None:
    from faithtests.protocols.lgip.sources import lgip_workload

    path = _lgip(tmp_path, combined=False)
    Image.fromarray(np.full((8, 8), 32896, dtype=np.uint16)).save(tmp_path / "a.png")  # mid-grey, 16 bits
    assert np.asarray(lgip_workload(path).images["1"]()).tolist()[0][0] == [128, 128, 128]


def test_float_image_is_refused_naming_the_file(tmp_path: Path) -> None:
    from faithtests.data.load_errors import ImageLoadError
    from faithtests.data.loaded import ImageRef

    path = tmp_path / "f.tif"
    Image.fromarray(np.zeros((2, 2), dtype=np.float32)).save(path)
    with pytest.raises(ImageLoadError) as err:
        ImageRef(path).load()
    assert str(err.value) == (f"cannot load image {path}: ValueError: float pixels (mode F) have no defined "
                              "range; save the image as 8- or 16-bit")
