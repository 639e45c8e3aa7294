"""The model fixtures plugin (faithtests.plugin.model_fixtures), driven by pytester with tiny models."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy  # noqa: F401  (inline runs restore sys.modules: heavy modules must be imported already)
import open_clip  # noqa: F401
import pytest
import torch
import transformers  # noqa: F401
from threadpoolctl import threadpool_limits

from faithtests.plugin.distribution import worker_device
from faithtests.protocols import load_suite_thresholds

PLUGINS = ("-p", "faithtests.plugin", "-p", "no:cacheprovider",
           "-p", "no:hypothesispytest", "-p", "no:anyio")

SUITE = """
import pytest
from faithtests.models.interfaces import ImageTextScorer, VisionLanguageModel

def test_scorer(faith_scorer, request):
    assert isinstance(faith_scorer, ImageTextScorer)
    marks = {m.name: m.kwargs for m in request.node.iter_markers()}
    assert marks["xdist_group"]["name"] == request.node.callspec.id

def test_vlm(faith_vlm, faith):
    assert isinstance(faith_vlm, VisionLanguageModel)
    faith.metric("layers", float(faith_vlm.num_layers), higher_is_better=True)
"""


@pytest.fixture(autouse=True)
def _preloaded(load_tiny: Callable[..., Any]) -> None:
    """Load the tiny models once in this process first: inline pytester runs drop the modules they
    import, and transformers imports its model modules lazily; re-importing them later would create
    second copies of transformers' registries and classes."""
    import faithtests.models.vlm_scorer  # noqa: F401

    for name in ("open_clip", "clip", "llava"):
        load_tiny(name)


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_suite=SUITE)
    (pytester.path / "suites").mkdir()
    (pytester.path / "suites" / "thresholds.toml").write_text("")
    return pytester


def test_parametrised_by_label_and_fingerprinted(
    project: pytest.Pytester, tiny_dir: Callable[[str], Path]
) -> None:
    result = project.runpytest_inprocess(
        *PLUGINS, "-v", "--faith-model", f"oc=open_clip:local-dir:{tiny_dir('open_clip')}",
        "--faith-model", f"hfclip=hf:{tiny_dir('clip')}", "--faith-vlm", f"llava=hf:{tiny_dir('llava')}",
        "--faith-report", "out",
    )
    result.assert_outcomes(passed=4)  # the VLM also runs as a scorer (its caption log-likelihood)
    result.stdout.fnmatch_lines(["*test_scorer?oc?*PASSED*", "*test_scorer?hfclip?*PASSED*",
                                 "*test_scorer?llava?*PASSED*", "*test_vlm?llava?*PASSED*"])
    card = json.loads((project.path / "out" / "scorecard.json").read_text())
    models = card["fingerprint"]["models"]
    assert models["llava"]["family"] == "llava" and models["llava"]["option"] == "--faith-vlm"
    # both roles' info reached the controller: the VLM's own spec (registered second) and the scorer's kind
    assert models["llava"]["spec"].startswith("hf:") and models["llava"]["score"] == "caption_mean_logprob"
    assert len(models["llava"]["checkpoint_sha256"]["model.safetensors"]) == 64
    assert models["llava"]["dtype"] == "float32" and models["llava"]["device"] == "cpu"
    # how its multiple-choice answers are read (issue 45); the run's mode is a comparable field
    assert models["llava"]["answers"] == "option scoring" and "answers" not in models["oc"]
    assert card["fingerprint"]["answer_mode"] == "auto"


def test_each_model_loaded_once_per_process(
    project: pytest.Pytester, tiny_dir: Callable[[str], Path]
) -> None:
    project.makepyfile(test_suite="""
        from faithtests.plugin.model_fixtures import _LOADED
        IDS = {}

        def test_a(faith_scorer, request):
            IDS.setdefault(request.node.callspec.id, set()).add(id(faith_scorer))

        def test_b(faith_scorer, request):
            IDS.setdefault(request.node.callspec.id, set()).add(id(faith_scorer))

        def test_c(faith_load_model, faith_scorer):
            assert faith_load_model(faith_scorer.spec) is faith_scorer

        def test_z_count(request):
            assert sorted(IDS) == ["a", "b"] and all(len(v) == 1 for v in IDS.values())
            assert len(request.config.stash[_LOADED]) == 2  # two specs, each loaded once
    """)
    result = project.runpytest_inprocess(
        *PLUGINS, "--faith-model", f"a=open_clip:local-dir:{tiny_dir('open_clip')}",
        "--faith-model", f"b=hf:{tiny_dir('clip')}", "-p", "no:randomly",
    )
    result.assert_outcomes(passed=7)


def test_defaults_to_reference_models(
    project: pytest.Pytester, tiny_dir: Callable[[str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(tiny_dir("open_clip"), tmp_path / "clip")
    monkeypatch.setenv("FAITHTESTS_FIXTURES", str(tmp_path))
    body = "def test_a(faith_scorer):\n    assert faith_scorer.spec == 'reference:clip'\n"
    project.makepyfile(test_suite=body)
    result = project.runpytest_inprocess(*PLUGINS, "-v", "-rs")
    # the default run also scores with the default VLM, which is not in this fixtures directory
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(["*test_a?reference:clip?*PASSED*", "*test_a?reference:vlm?*SKIPPED*",
                                 "*default reference:vlm is not trained yet*train-reference vlm*"])


@pytest.mark.parametrize(("args", "ids"), [
    (["--faith-model", "oc=SCORER"], ["oc"]),  # naming a scorer alone asks about that scorer
    (["--faith-model", "oc=SCORER", "--faith-vlm", "lv=VLM"], ["oc", "lv"]),
    (["--faith-vlm", "lv=VLM"], ["lv"]),  # naming any model drops every bundled default (issue 17.2)
    (["--faith-model", "oc=SCORER", "--faith-vlm", "lv=VLM", "--faith-no-vlm-scorer"], ["oc"]),
])
def test_scorer_params_include_each_vlm(
    project: pytest.Pytester, tiny_dir: Callable[[str], Path], args: list[str], ids: list[str]
) -> None:
    project.makepyfile(test_suite="def test_a(faith_scorer):\n    pass\n")
    specs = {"SCORER": f"open_clip:local-dir:{tiny_dir('open_clip')}", "VLM": f"hf:{tiny_dir('llava')}"}
    argv = [a.split("=")[0] + "=" + specs[a.split("=")[1]] if "=" in a else a for a in args]
    result = project.runpytest_inprocess(*PLUGINS, "--collect-only", "-q", *argv)
    collected = [line.split("[", 1)[1].rstrip("]") for line in result.outlines if "::test_a[" in line]
    assert collected == ids


def test_missing_reference_is_a_clear_error(
    project: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reference model the user names is loaded or fails naming the path (an untrained *default* is
    skipped with the fix in its reason instead: tests/models/test_registry.py)."""
    monkeypatch.setenv("FAITHTESTS_FIXTURES", str(tmp_path))
    project.makepyfile(test_suite="def test_v(faith_vlm):\n    pass\n")
    result = project.runpytest_inprocess(*PLUGINS, "--faith-vlm", "reference:vlm")
    assert result.ret == pytest.ExitCode.USAGE_ERROR  # checked at configure time, before any model loads
    result.stderr.fnmatch_lines([f"ERROR: --faith-vlm: reference:vlm: looked for {tmp_path / 'vlm'} *"])


def test_vlm_given_as_scorer_is_wrapped(project: pytest.Pytester, tiny_dir: Callable[[str], Path]) -> None:
    project.makepyfile(test_suite="""
        def test_a(faith_scorer):
            assert type(faith_scorer).__name__ == "VLMScorer"
            assert faith_scorer.fingerprint()["score"] == "caption_mean_logprob"
    """)
    result = project.runpytest_inprocess(*PLUGINS, "--faith-model", f"hf:{tiny_dir('llava')}")
    result.assert_outcomes(passed=1)


def test_scorer_given_as_vlm_errors(project: pytest.Pytester, tiny_dir: Callable[[str], Path]) -> None:
    project.makepyfile(test_suite="def test_v(faith_vlm):\n    pass\n")
    result = project.runpytest_inprocess(*PLUGINS, "--faith-vlm", f"hf:{tiny_dir('clip')}")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*not a generative VLM*"])


def test_explicit_cuda_marks_gpu(project: pytest.Pytester, tiny_dir: Callable[[str], Path]) -> None:
    project.makepyfile(test_suite="def test_a(faith_scorer):\n    pass\n")
    result = project.runpytest_inprocess(
        *PLUGINS, "--faith-device", "cuda", "--faith-model", f"hf:{tiny_dir('clip')}", "-m", "gpu",
        "--collect-only", "-q",
    )
    result.stdout.fnmatch_lines(["*test_a*"])
    result.stdout.no_fnmatch_line("*no tests collected*")
    result = project.runpytest_inprocess(
        *PLUGINS, "--faith-model", f"hf:{tiny_dir('clip')}", "-m", "gpu", "--collect-only", "-q"
    )
    result.stdout.fnmatch_lines(["*deselected*"])


def test_worker_device_pinning() -> None:
    assert worker_device("cuda", "gw0", 4) == "cuda:0"
    assert worker_device("cuda", "gw5", 4) == "cuda:1"
    assert worker_device("cuda", None, 4) == "cuda"
    assert worker_device("cuda", "gw3", 1) == "cuda"  # one GPU: nothing to pin
    assert worker_device("cuda:2", "gw3", 4) == "cuda:2"  # an explicit index wins
    assert worker_device("cpu", "gw3", 4) == "cpu"


def test_xdist_loadgroup_keeps_each_model_on_one_worker(
    project: pytest.Pytester, tiny_dir: Callable[[str], Path]
) -> None:
    """Under ``-n 2 --dist loadgroup`` every test of one model label runs on the same worker."""
    log = project.path / "log.txt"
    project.makepyfile(test_suite=f"""
        import os
        import pytest

        @pytest.mark.parametrize("i", range(3))
        def test_a(faith_scorer, request, i):
            with open({str(log)!r}, "a") as f:
                label = request.node.callspec.id.split("-")[0]
                f.write(label + " " + os.environ["PYTEST_XDIST_WORKER"] + " " + request.node.nodeid + "\\n")
    """)
    result = project.runpytest_subprocess(
        *PLUGINS, "-n", "2", "--dist", "loadgroup",
        "--faith-model", f"a=open_clip:local-dir:{tiny_dir('open_clip')}",
        "--faith-model", f"b=hf:{tiny_dir('clip')}",
    )
    result.assert_outcomes(passed=6)
    workers: dict[str, set[str]] = {}
    for line in log.read_text().splitlines():
        label, worker, nodeid = line.split()
        assert nodeid.endswith(f"@{label}")  # xdist's group suffix (restored on pytest >= 9.2)
        workers.setdefault(label, set()).add(worker)
    assert sorted(workers) == ["a", "b"] and all(len(w) == 1 for w in workers.values())


def test_model_spec_is_parsed_once_and_keeps_its_role() -> None:
    """One identity per model: label, spec, the option that named it and the role a test uses it in."""
    from faithtests.models.vlm_scorer import VLMScorer
    from faithtests.plugin.options import ModelSpec


    m = ModelSpec.parse(" v = hf:/ckpt ", "vlm")
    assert (m.label, m.spec, m.source, m.role, m.option) == ("v", "hf:/ckpt", "vlm", "vlm", "--faith-vlm")
    s = m.as_scorer()
    assert (s.label, s.spec, s.source, s.role, s.option) == ("v", "hf:/ckpt", "vlm", "scorer", "--faith-vlm")
    bare = ModelSpec.parse("open_clip:ViT-B-32@openai")
    assert bare.label == bare.spec == "open_clip:ViT-B-32@openai" and bare.role == "scorer"
    with pytest.raises(ValueError, match="empty"):
        ModelSpec.parse("x=")
    # the score kind a VLM scorer declares has its own thresholds in the default file
    root = Path(__file__).resolve().parents[2]
    e_inv = load_suite_thresholds(root / "suites/thresholds.toml").entries("invariance")["E_inv"]
    assert VLMScorer.score_kind in e_inv.family


def test_models_named_in_the_ini_file_count_as_named(
    project: pytest.Pytester, tiny_dir: Callable[[str], Path]
) -> None:
    """``faith_model = X`` in the ini file asks about X alone, like ``--faith-model X``."""
    project.makeini(f"[pytest]\nfaith_model = oc=open_clip:local-dir:{tiny_dir('open_clip')}\n")
    project.makepyfile(test_suite="def test_a(faith_scorer):\n    pass\n")
    result = project.runpytest_inprocess(*PLUGINS, "--collect-only", "-q")
    collected = [line.split("[", 1)[1].rstrip("]") for line in result.outlines if "::test_a[" in line]
    assert collected == ["oc"]


def test_thread_choice_is_applied_and_fingerprinted(
    project: pytest.Pytester, tiny_dir: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tiny model gets one thread under the automatic policy; --faith-threads overrides it; the
    choice lands in the scorecard with the model's info, numpy's BLAS pool included."""
    before = torch.get_num_threads()
    monkeypatch.delenv("PYTEST_XDIST_WORKER_COUNT", raising=False)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "FAITH_THREADS_SET",
                "RAYON_NUM_THREADS", "TOKENIZERS_PARALLELISM"):
        monkeypatch.setenv(var, "")  # no setting for the policy ("" is none), and restored afterwards
    pools = threadpool_limits(limits=2)  # the policy's limits are undone after the test
    project.makepyfile(test_suite="""
        import torch

        def test_a(faith, faith_scorer):
            faith.metric("threads", torch.get_num_threads())
    """)
    spec = f"oc=open_clip:local-dir:{tiny_dir('open_clip')}"
    try:
        for extra, threads, policy in (((), 1, "auto: models below"), (("--faith-threads", "3"), 3,
                                                                       "--faith-threads")):
            result = project.runpytest_inprocess(*PLUGINS, "--faith-model", spec, "--faith-report", "out",
                                                 *extra)
            result.assert_outcomes(passed=1)
            card = json.loads((project.path / "out" / "scorecard.json").read_text())
            info = card["fingerprint"]["models"]["oc"]
            assert info["torch_threads"] == threads and info["thread_policy"].startswith(policy)
            assert info["blas_threads"] == threads  # numpy's BLAS pool follows the same choice
            assert card["results"][0]["value"] == threads
    finally:
        torch.set_num_threads(before)
        pools.restore_original_limits()
