"""Reliability corpus, models (engineer M): wrong weights never run quietly, every spec is checked at
configure time (exit 4, one ``ERROR:`` line, no test run), models from other packages are checked against
the protocols, captions longer than a model's context are counted, and non-finite scores stay visible."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest
import torch
from _usage import PLUGINS, minimal_project, usage_error
from PIL import Image

from faithtests.models.checks import check_spec
from faithtests.models.errors import (
    CheckpointError,
    ModelNotFoundError,
    ModelSpecError,
    UnsupportedModelError,
)
from faithtests.models.registry import load_model
from faithtests.models.vlm_scorer import VLMScorer

#: The built-in prefixes, then those installed packages register (faithtests' own ``openai:``, served
#: models, and ``policy:``, its gate tests' one-answer models: faithtests/testing/policies.py)
PREFIXES = "['reference:', 'open_clip:', 'hf:', 'vlm-scorer:', 'py:', 'openai:', 'policy:']"
LONG_CAPTION = " ".join(["a small red cube sits to the left of a large blue sphere on a wooden table"] * 7)


def _copy(tiny_dir: Callable[[str], Path], name: str, to: Path) -> Path:
    shutil.copytree(tiny_dir(name), to)
    return to


def _edit_open_clip_cfg(folder: Path, tower: str, **changes: Any) -> Path:
    config = folder / "open_clip_config.json"
    data = json.loads(config.read_text())
    data["model_cfg"][tower].update(changes)
    config.write_text(json.dumps(data))
    return config


def _raises(exc: type[Exception], spec: str, **kw: Any) -> str:
    with pytest.raises(exc) as err:
        load_model(spec, device="cpu", **kw)
    assert "\n" not in str(err.value)
    return str(err.value)


# -- A: wrong weights never run quietly -----------------------------------------------------------------
def test_open_clip_local_dir_without_weights(tiny_dir: Callable[[str], Path], tmp_path: Path) -> None:
    d = tmp_path / "cfg_only"
    d.mkdir()
    shutil.copy(tiny_dir("open_clip") / "open_clip_config.json", d)
    assert _raises(ModelNotFoundError, f"open_clip:local-dir:{d}") == (
        f"open_clip:local-dir:{d}: {d} has open_clip_config.json but no weights file (*.safetensors, *.bin, "
        "*.pth); open_clip would run a randomly initialised model")


def test_open_clip_image_size_mismatch(tiny_dir: Callable[[str], Path], tmp_path: Path) -> None:
    d = _copy(tiny_dir, "open_clip", tmp_path / "img64")
    config = _edit_open_clip_cfg(d, "vision_cfg", image_size=64)
    assert _raises(CheckpointError, f"open_clip:local-dir:{d}") == (
        f"open_clip:local-dir:{d}: the weights {d / 'open_clip_model.safetensors'} do not match the sizes in "
        f"{config}: visual.positional_embedding is [17, 32] in the weights but [65, 32] for the config "
        "(open_clip would interpolate them; fix the config's image_size / context_length, or allow it with "
        "FAITHTESTS_RESIZE_POS_EMBED=1)")


def test_open_clip_context_length_mismatch(tiny_dir: Callable[[str], Path], tmp_path: Path) -> None:
    d = _copy(tiny_dir, "open_clip", tmp_path / "ctx16")
    _edit_open_clip_cfg(d, "text_cfg", context_length=16)
    assert "positional_embedding is [32, 32] in the weights but [16, 32] for the config" in _raises(
        CheckpointError, f"open_clip:local-dir:{d}")


def test_open_clip_resize_is_an_explicit_opt_in(tiny_dir: Callable[[str], Path], tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    d = _copy(tiny_dir, "open_clip", tmp_path / "img64")
    _edit_open_clip_cfg(d, "vision_cfg", image_size=64)
    monkeypatch.setenv("FAITHTESTS_RESIZE_POS_EMBED", "1")
    model = load_model(f"open_clip:local-dir:{d}", device="cpu")
    assert model.fingerprint()["pos_embed_resized"] == [
        "visual.positional_embedding is [17, 32] in the weights but [65, 32] for the config"]
    monkeypatch.delenv("FAITHTESTS_RESIZE_POS_EMBED")
    assert load_model(f"open_clip:local-dir:{d}", device="cpu", resize_pos_embed=True) is not None


def test_open_clip_wrong_architecture_names_spec_config_and_weights(
    tiny_dir: Callable[[str], Path], tmp_path: Path
) -> None:
    d = _copy(tiny_dir, "open_clip", tmp_path / "wide_text")
    config = _edit_open_clip_cfg(d, "text_cfg", width=64, heads=4)
    assert _raises(CheckpointError, f"open_clip:local-dir:{d}") == (
        f"open_clip:local-dir:{d}: the weights {d / 'open_clip_model.safetensors'} do not fit the "
        f"architecture in {config}: the text tower's width differs "
        "(open_clip: text pos_embed width changed!)")


def test_open_clip_builtin_architecture_with_foreign_weights(tiny_dir: Callable[[str], Path]) -> None:
    weights = tiny_dir("open_clip") / "open_clip_model.safetensors"
    assert _raises(CheckpointError, f"open_clip:ViT-B-32@{weights}") == (
        f"open_clip:ViT-B-32@{weights}: the weights {weights} do not fit the architecture in open_clip's "
        "built-in ViT-B-32 config: the text tower's width differs (open_clip: text pos_embed width changed!)")


def test_open_clip_vision_width_mismatch(tiny_dir: Callable[[str], Path], tmp_path: Path) -> None:
    d = _copy(tiny_dir, "open_clip", tmp_path / "wide_vision")
    config = _edit_open_clip_cfg(d, "vision_cfg", width=64)
    assert _raises(CheckpointError, f"open_clip:local-dir:{d}") == (
        f"open_clip:local-dir:{d}: the weights {d / 'open_clip_model.safetensors'} do not fit the "
        f"architecture in {config}: visual.class_embedding is [32] in the weights but [64] for the config "
        "(and 31 more tensors)")


def test_truncated_safetensors(tiny_dir: Callable[[str], Path], tmp_path: Path) -> None:
    d = _copy(tiny_dir, "open_clip", tmp_path / "cut")
    weights = d / "open_clip_model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    message = _raises(CheckpointError, f"open_clip:local-dir:{d}")
    assert message.startswith(f"open_clip:local-dir:{d}: weights file {weights} is truncated: its header "
                              "declares ")
    assert message.endswith(f" bytes, the file has {len(data) // 2}")


def test_hf_directory_of_random_bytes(tmp_path: Path) -> None:
    for name in ("config.json", "model.safetensors"):
        (tmp_path / name).write_bytes(b"\xff\xfe\x00" + os.urandom(300))
    assert _raises(CheckpointError, f"hf:{tmp_path}") == (
        f"hf:{tmp_path}: config {tmp_path / 'config.json'} is not a text file (corrupt or not a config)")


def test_hf_weights_of_random_bytes(tiny_dir: Callable[[str], Path], tmp_path: Path) -> None:
    d = _copy(tiny_dir, "clip", tmp_path / "clip")
    (d / "model.safetensors").write_bytes(b"\xff" * 3000)
    assert _raises(CheckpointError, f"hf:{d}") == (
        f"hf:{d}: weights file {d / 'model.safetensors'} is not a safetensors file or is truncated "
        "(no valid header in its 3000 bytes)")


def test_hf_config_not_json(tiny_dir: Callable[[str], Path], tmp_path: Path) -> None:
    d = _copy(tiny_dir, "clip", tmp_path / "clip")
    (d / "config.json").write_text("{ not json")
    assert _raises(CheckpointError, f"hf:{d}") == (
        f"hf:{d}: config {d / 'config.json'} is not valid JSON (Expecting property name enclosed in double "
        "quotes at line 1)")


def test_hf_directory_without_weights(tiny_dir: Callable[[str], Path], tmp_path: Path) -> None:
    d = _copy(tiny_dir, "clip", tmp_path / "clip")
    (d / "model.safetensors").unlink()
    assert _raises(ModelNotFoundError, f"hf:{d}") == (
        f"hf:{d}: {d} has config.json but no weights file (*.safetensors, *.bin, *.pth, *.pt, *.ckpt)")


def test_hf_wrong_architecture(tiny_dir: Callable[[str], Path], tmp_path: Path) -> None:
    d = _copy(tiny_dir, "clip", tmp_path / "clip")
    config = json.loads((d / "config.json").read_text())
    config["text_config"]["hidden_size"] = 64
    (d / "config.json").write_text(json.dumps(config))
    assert _raises(CheckpointError, f"hf:{d}") == (
        f"hf:{d}: the weights in {d} do not fit the architecture in its config.json (transformers reports "
        "size mismatches)")


# -- B: every spec checked at configure time ------------------------------------------------------------
@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return minimal_project(pytester, "def test_a(faith_scorer):\n    pass\n")



def test_misspelt_prefix_exits_4_with_did_you_mean(project: pytest.Pytester) -> None:
    assert usage_error(project, "--faith-model", "open_clp:local-dir:ckpt") == (
        f"ERROR: --faith-model: unknown model spec 'open_clp:local-dir:ckpt'; it must start with one of "
        f"{PREFIXES}; did you mean 'open_clip:local-dir:ckpt'?")


def test_missing_local_dir_exits_4_naming_the_label(project: pytest.Pytester) -> None:
    missing = project.path / "nope"
    assert usage_error(project, "--faith-vlm", f"mine=hf:{missing}") == (
        f"ERROR: --faith-vlm mine: hf:{missing}: model not found locally and downloads are off. Looked for: "
        f"local directory {missing}. Pass a local directory (hf:/path/to/model) or allow downloads.")


def test_truncated_weights_exit_4_before_loading(project: pytest.Pytester, tiny_dir: Callable[[str], Path]
                                                 ) -> None:
    d = _copy(tiny_dir, "open_clip", project.path / "cut")
    weights = d / "open_clip_model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    assert usage_error(project, "--faith-model", f"open_clip:local-dir:{d}") == (
        f"ERROR: --faith-model: open_clip:local-dir:{d}: weights file {weights} is not a safetensors file or "
        "is truncated (no valid header in its 100 bytes)")


def test_ini_spec_is_checked_too(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\nfaith_model =\n    hf\n")
    assert usage_error(project) == (
        f"ERROR: --faith-model: unknown model spec 'hf'; it must start with one of {PREFIXES}")


def test_bare_reference_name_suggests_the_prefix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAITHTESTS_FIXTURES", str(tmp_path))
    (tmp_path / "clip").mkdir()
    with pytest.raises(ModelSpecError) as err:
        check_spec("clip")
    assert str(err.value) == (
        f"unknown model spec 'clip'; it must start with one of {PREFIXES}; did you mean 'reference:clip'?")


def test_open_clip_spec_without_weights_is_refused_before_loading() -> None:
    with pytest.raises(ModelSpecError) as err:
        check_spec("open_clip:ViT-B-32")
    assert str(err.value) == (
        "open_clip:ViT-B-32: give weights as open_clip:NAME@PRETRAINED (a tag or a local file), or "
        "open_clip:local-dir:PATH; a randomly initialised model is never loaded silently")


def test_check_spec_imports_no_torch(tiny_dir: Callable[[str], Path]) -> None:
    code = ("import sys; from faithtests.models.registry import check_spec; "
            f"check_spec('open_clip:local-dir:{tiny_dir('open_clip')}'); "
            f"check_spec('hf:{tiny_dir('clip')}'); "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# -- C: models from other packages ----------------------------------------------------------------------
@pytest.fixture
def on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(Path(__file__).parent))


def test_py_spec_loads_a_custom_scorer(on_path: None) -> None:
    model = load_model("py:custom_scorer:make", device="cpu")
    assert model.fingerprint()["family"] == "grey"
    assert getattr(model, "device", None) == torch.device("cpu")
    white, black = Image.new("RGB", (4, 4), "white"), Image.new("RGB", (4, 4), "black")
    assert model.similarity([white, black], ["x" * 100, "x" * 100]).tolist() == pytest.approx([1.0, 0.0])


def test_py_spec_missing_protocol_methods(on_path: None) -> None:
    assert _raises(UnsupportedModelError, "py:custom_scorer:make_half") == (
        "py:custom_scorer:make_half: the factory returned a HalfScorer, which is neither an ImageTextScorer "
        "(missing: fingerprint, similarity) nor a VisionLanguageModel (missing: answer_logprob, attentions, "
        "decide, fingerprint, generate, num_layers, option_logits, states)")


def test_py_spec_unknown_module_and_factory(on_path: None) -> None:
    with pytest.raises(ModelNotFoundError) as err:
        check_spec("py:no_such_module_here:make")
    assert str(err.value) == ("py:no_such_module_here:make: no module named 'no_such_module_here' "
                              "(is it installed or on sys.path?)")
    assert _raises(ModelSpecError, "py:custom_scorer:nothing") == (
        "py:custom_scorer:nothing: module 'custom_scorer' has no callable 'nothing'")
    with pytest.raises(ModelSpecError, match=r"^py:custom_scorer: expected py:package\.module:factory$"):
        check_spec("py:custom_scorer")


def _entry_points(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    point = EntryPoint(name="grey", value=value, group="faithtests.models")

    def fake(**kw: Any) -> list[EntryPoint]:
        return [point] if kw.get("group") == "faithtests.models" else []

    monkeypatch.setattr("faithtests.models.plugins.entry_points", fake)


def test_entry_point_prefix(on_path: None, monkeypatch: pytest.MonkeyPatch) -> None:
    _entry_points(monkeypatch, "custom_scorer:from_rest")
    check_spec("grey:anything/at/all")
    model = load_model("grey:dark-v1", device="cpu")
    assert model.spec == "grey:dark-v1" and getattr(model, "device", None) == torch.device("cpu")
    with pytest.raises(ModelSpecError, match=r"did you mean 'grey:x'\?$"):
        check_spec("grye:x")


def test_entry_point_that_fails_to_import(monkeypatch: pytest.MonkeyPatch) -> None:
    _entry_points(monkeypatch, "no_such_module_here:make")
    assert _raises(ModelNotFoundError, "grey:x") == (
        "grey:x: the faithtests.models entry point 'grey' = 'no_such_module_here:make' failed to load: "
        "No module named 'no_such_module_here'")


# -- D: captions longer than the context are counted ----------------------------------------------------
def test_long_caption_counted_on_tiny_open_clip(load_tiny: Callable[..., Any]) -> None:
    model = load_model(f"open_clip:local-dir:{load_tiny('open_clip').spec.split(':', 2)[2]}", device="cpu")
    assert len(LONG_CAPTION.split()) > 100
    model.encode_texts(["a red cube", LONG_CAPTION, LONG_CAPTION])
    model.encode_texts([LONG_CAPTION])  # seen before: counted once
    assert model.truncation_info() == {"caption": {"truncated": 1, "checked": 2, "limit": 32,
                                                   "longest_tokens": 121}}
    assert model.fingerprint()["truncated_inputs"]["caption"]["truncated"] == 1


def test_long_caption_counted_on_tiny_hf_clip(tiny_dir: Callable[[str], Path]) -> None:
    model = load_model(f"hf:{tiny_dir('clip')}", device="cpu")
    model.encode_texts(["cube", " ".join(["cube"] * 40)])
    info = model.truncation_info()["caption"]
    assert (info["truncated"], info["checked"], info["limit"]) == (1, 2, 32)


def test_long_caption_counted_by_the_vlm_scorer(tiny_dir: Callable[[str], Path]) -> None:
    scorer = load_model(f"vlm-scorer:hf:{tiny_dir('llava')}", device="cpu")
    assert isinstance(scorer, VLMScorer)
    scorer.vlm.caption_truncation.limit = 4  # the tiny LM's context is 2048: lower it to see the count
    image = Image.new("RGB", (32, 32), "red")
    scorer.similarity([image, image], ["red", "red red red red red red"])
    assert scorer.truncation_info()["caption"]["truncated"] == 1
    assert scorer.fingerprint()["truncated_inputs"]["caption"]["truncated"] == 1


def test_truncation_count_reaches_the_scorecard(project: pytest.Pytester, tiny_dir: Callable[[str], Path]
                                                ) -> None:
    project.makepyfile(test_a="def test_a(faith_scorer, faith):\n"
                              f"    faith_scorer.encode_texts([{LONG_CAPTION!r}])\n")
    result = project.runpytest(*PLUGINS, "--faith-model", f"tiny=open_clip:local-dir:{tiny_dir('open_clip')}")
    result.assert_outcomes(passed=1)
    card = json.loads((project.path / "faith-report" / "scorecard.json").read_text())
    assert card["fingerprint"]["models"]["tiny"]["truncated_inputs"] == {
        "caption": {"truncated": 1, "checked": 1, "limit": 32, "longest_tokens": 121}}
    # and a coverage line says so in the terminal and the HTML (issue 31 item 9)
    line = "coverage model tiny: 1 of 1 captions truncated to its 32-token context (100.0%; longest 121 "
    assert line in result.stdout.str()
    assert line in (project.path / "faith-report" / "scorecard.html").read_text()


# -- E: non-finite outputs stay visible -----------------------------------------------------------------
def test_nan_weights_give_nan_scores_not_numbers(tiny_dir: Callable[[str], Path], tmp_path: Path) -> None:
    """Adapters never hide a non-finite score (no nan_to_num): the recording layer counts it invalid."""
    from safetensors.torch import load_file, save_file

    d = _copy(tiny_dir, "open_clip", tmp_path / "nan")
    weights = d / "open_clip_model.safetensors"
    state = load_file(str(weights))
    state["ln_final.weight"] = torch.full_like(state["ln_final.weight"], float("nan"))
    save_file(state, str(weights))
    model = load_model(f"open_clip:local-dir:{d}", device="cpu")
    score = model.similarity([Image.new("RGB", (32, 32), "red")], ["a red square"])
    assert torch.isnan(score).all()
