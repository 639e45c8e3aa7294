"""Spec strings: dispatch, reference fixtures, and clear errors for anything missing (never a download)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import faithtests
from faithtests.models.errors import ModelNotFoundError, ModelSpecError, UnsupportedModelError
from faithtests.models.hf_dual import HFDualEncoder
from faithtests.models.hf_vlm import HFVisionLanguageModel
from faithtests.models.locations import fixtures_root
from faithtests.models.open_clip_adapter import OpenClipScorer
from faithtests.models.registry import load_model, resolve_dtype


def test_unknown_prefix_and_empty_specs() -> None:
    with pytest.raises(ModelSpecError, match="must start with one of"):
        load_model("clip-vit")
    for spec in ("hf:", "open_clip:", "reference:", "reference:../x"):
        with pytest.raises(ModelSpecError):
            load_model(spec)
    with pytest.raises(ModelSpecError, match="unknown dtype"):
        resolve_dtype("int3")


def test_missing_reference_names_the_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAITHTESTS_FIXTURES", str(tmp_path))
    (tmp_path / "other").mkdir()
    with pytest.raises(ModelNotFoundError) as err:
        load_model("reference:clip")
    message = str(err.value)
    assert str(tmp_path / "clip") in message and "other" in message and "open_clip_config.json" in message
    assert isinstance(err.value, FileNotFoundError)


def test_default_fixtures_root_is_next_to_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FAITHTESTS_FIXTURES", raising=False)
    assert fixtures_root() == Path(faithtests.__file__).resolve().parent.parent / "fixtures"


def test_reference_dispatch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiny_dir: Callable[[str], Path]
) -> None:
    shutil.copytree(tiny_dir("open_clip"), tmp_path / "clip")
    shutil.copytree(tiny_dir("llava"), tmp_path / "vlm")
    monkeypatch.setenv("FAITHTESTS_FIXTURES", str(tmp_path))
    clip = load_model("reference:clip", device="cpu")
    vlm = load_model("reference:vlm", device="cpu")
    assert isinstance(clip, OpenClipScorer) and clip.fingerprint()["spec"] == "reference:clip"
    assert isinstance(vlm, HFVisionLanguageModel) and vlm.fingerprint()["spec"] == "reference:vlm"


def test_hf_detects_dual_vs_vlm(load_tiny: Callable[..., Any]) -> None:
    assert isinstance(load_tiny("clip"), HFDualEncoder)
    assert isinstance(load_tiny("siglip"), HFDualEncoder)
    assert isinstance(load_tiny("qwen2_vl"), HFVisionLanguageModel)


def test_hf_missing_path_and_uncached_repo(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="Looked for: local directory"):
        load_model(f"hf:{tmp_path / 'nope'}")
    with pytest.raises(ModelNotFoundError, match="cache entry for repo 'faith-none/no-such-model'"):
        load_model("hf:faith-none/no-such-model")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelNotFoundError, match=r"has no config\.json"):
        load_model(f"hf:{tmp_path / 'empty'}")


def test_unsupported_model_type(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert", "architectures": ["BertModel"]}))
    (tmp_path / "pytorch_model.bin").write_bytes(b"never read: the model type is refused first")
    with pytest.raises(UnsupportedModelError, match="'bert'"):
        load_model(f"hf:{tmp_path}")


def test_open_clip_errors(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match=r"open_clip_config\.json"):
        load_model(f"open_clip:local-dir:{tmp_path}")
    with pytest.raises(ModelSpecError, match="NAME@PRETRAINED"):
        load_model("open_clip:ViT-B-32")
    with pytest.raises(ModelNotFoundError, match="not an open_clip architecture"):
        load_model("open_clip:No-Such-Net@x")
    with pytest.raises(ModelNotFoundError, match="neither a file nor a pretrained tag"):
        load_model("open_clip:ViT-B-32@no_such_tag")
    with pytest.raises(ModelNotFoundError, match=r"weights file .*missing\.safetensors does not exist"):
        load_model(f"open_clip:ViT-B-32@{tmp_path / 'missing.safetensors'}")
    with pytest.raises(ModelNotFoundError) as err:
        load_model("open_clip:ViT-B-32@laion2b_s34b_b79k")
    message = str(err.value)
    assert "Looked for:" in message and "laion2b_s34b_b79k" in message
    assert "open_clip:ViT-B-32@/path/to/weights.safetensors" in message
    with pytest.raises(ModelNotFoundError, match="does not exist"):
        load_model(f"open_clip:{tmp_path / 'cfg.json'}@{tmp_path / 'w.safetensors'}")


def test_vlm_scorer_needs_a_vlm(load_tiny: Callable[..., Any], tiny_dir: Callable[[str], Path]) -> None:
    with pytest.raises(ModelSpecError, match="generative VLM"):
        load_model(f"vlm-scorer:hf:{tiny_dir('clip')}")


def test_top_level_load_model_delegates(tiny_dir: Callable[[str], Path]) -> None:
    model = faithtests.load_model(f"hf:{tiny_dir('clip')}", device="cpu")
    assert isinstance(model, HFDualEncoder)


def test_untrained_default_reference_model_skips_with_a_reason(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A default reference model whose checkpoint is absent is skipped with the fix in the reason; a
    spec the user names explicitly is never skipped (a usage error at configure time, naming the path)."""
    monkeypatch.setenv("FAITHTESTS_FIXTURES", str(tmp_path))
    pytester.makepyfile("def test_vlm(faith_vlm):\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "faithtests.plugin.pytest_hooks", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*default reference:vlm is not trained yet*faithtests train-reference vlm*"])
    explicit = pytester.runpytest_subprocess("-p", "faithtests.plugin.pytest_hooks",
                                             "--faith-vlm", "reference:vlm")
    assert explicit.ret == pytest.ExitCode.USAGE_ERROR
    explicit.stderr.fnmatch_lines([f"ERROR: --faith-vlm: reference:vlm: looked for {tmp_path / 'vlm'} *"])
