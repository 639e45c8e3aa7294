"""Issue 31 item 5: usage errors at start, exit 4, one ``ERROR:`` line, before any model loads."""

from __future__ import annotations

import json
from pathlib import Path

import numpy  # noqa: F401  (inline runs restore sys.modules; numpy and torch cannot be imported twice)
import pytest
import torch  # (imported here too: the device check imports it inside the inline run)
from _usage import PLUGINS, minimal_project, usage_error


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    return minimal_project(pytester)


def _missing_cuda() -> tuple[str, str]:
    """A CUDA device this machine lacks, and the error it gets (the machine may have some GPUs)."""
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        return "cuda", ("ERROR: --faith-device cuda: no CUDA device on this machine "
                        "(torch.cuda.is_available() is False); use --faith-device cpu or auto")
    return f"cuda:{count}", (f"ERROR: --faith-device cuda:{count}: this machine has {count} CUDA device(s), "
                             f"cuda:0..cuda:{count - 1}")


def test_cuda_device_this_machine_lacks(project: pytest.Pytester) -> None:
    """Today every model test was skipped and the run exited 0."""
    device, error = _missing_cuda()
    assert usage_error(project, "--faith-device", device) == error


def test_missing_cuda_never_replaces_the_baseline(project: pytest.Pytester) -> None:
    """With --faith-update-baseline the baseline was replaced by an empty one: now nothing is written."""
    device, error = _missing_cuda()
    project.makepyfile(test_a="def test_a(faith):\n    faith.metric('acc', 0.5)\n")
    base = project.path / "base" / "scorecard.json"
    assert project.runpytest(*PLUGINS, "--faith-baseline", str(base), "--faith-update-baseline").ret == 0
    kept = base.read_text()
    assert '"acc"' in kept
    assert usage_error(project, "--faith-device", device, "--faith-baseline", str(base),
                       "--faith-update-baseline") == error
    assert base.read_text() == kept


@pytest.mark.parametrize("device", ["tpu", "cuda:x", "gpu0"])
def test_unknown_device(project: pytest.Pytester, device: str) -> None:
    assert usage_error(project, "--faith-device", device) == (
        f"ERROR: --faith-device: {device!r} is not a device (auto, cpu, cuda, cuda:N or mps)")


@pytest.mark.parametrize("n", ["0", "-3"])
def test_batch_size_below_one(project: pytest.Pytester, n: str) -> None:
    assert usage_error(project, "--faith-batch-size", n) == f"ERROR: --faith-batch-size must be >= 1, got {n}"


@pytest.mark.parametrize(("value", "error"), [
    ("kappa=inf", "SAGE: need finite kappa >= 0, alpha_max >= 0 and alpha0 + alpha_max <= 1, got kappa=inf, "
                  "alpha_max=0.5, alpha0=0.1"),
    ("kappa=nan", "SAGE: need finite kappa >= 0, alpha_max >= 0 and alpha0 + alpha_max <= 1, got kappa=nan, "
                  "alpha_max=0.5, alpha0=0.1"),
    ("alpha=inf", "SAGE: alpha=inf, alpha0=inf must lie in [0, 1] (1 - alpha >= 0)"),
    ("eta=-1", "SAGE: eta must be finite and >= 0 (Eq. 7), got -1.0"),
])
def test_sage_values_out_of_range(project: pytest.Pytester, value: str, error: str) -> None:
    assert usage_error(project, "--faith-sage", value) == f"ERROR: --faith-sage: {error}"


def test_threshold_family_no_adapter_declares(project: pytest.Pytester) -> None:
    """A typo (``siglp``) made a family value that never applied, silently."""
    th = project.path / "suites" / "thresholds.toml"
    th.write_text('[flip]\nPR = { op = ">=", value = 0.7, family = { siglp = 0.55 } }\n')
    assert usage_error(project) == (
        f"ERROR: faithtests thresholds: family 'siglp' in [flip] PR (from {th}) is declared by no model "
        "adapter (did you mean 'siglip'?); families: clip, siglip, cosine, caption_mean_logprob or an HF "
        "config's model_type")


def test_known_families_and_model_types_pass(project: pytest.Pytester) -> None:
    (project.path / "suites" / "thresholds.toml").write_text(
        '[flip]\nPR = { op = ">=", value = 0.7, family = { siglip = 0.55, llava = 0.6, clip = 0.7 } }\n')
    assert project.runpytest(*PLUGINS).ret == 0


def test_a_plugin_model_may_declare_its_own_family(project: pytest.Pytester) -> None:
    """``py:`` models declare their family only when loaded: a family the run cannot know is allowed."""
    (project.path / "suites" / "thresholds.toml").write_text(
        '[flip]\nPR = { op = ">=", value = 0.7, family = { grey = 0.5 } }\n')
    (project.path / "grey.py").write_text("def make():\n    raise RuntimeError('never loaded')\n")
    project.syspathinsert()
    assert project.runpytest(*PLUGINS, "--faith-model", "py:grey:make").ret == 0


CONFTEST = """
import pytest
from faithtests.plugin.options import register_model_info

@pytest.fixture(scope="session")
def clip(pytestconfig):
    register_model_info(pytestconfig, "clip-a", {"spec": "reference:clip"})
    return "clip-a"
"""


def test_baseline_of_other_models_is_caught_at_start(pytester: pytest.Pytester) -> None:
    """The baseline's models (its fingerprint) are none of the named ones: an error before any model
    loads, not a run whose every result is missing."""
    (pytester.path / "suites").mkdir()
    (pytester.path / "suites" / "thresholds.toml").write_text("")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_gate="def test_acc(faith, clip):\n    faith.metric('acc', 0.9)\n")
    base = pytester.path / "base" / "scorecard.json"
    assert pytester.runpytest(*PLUGINS, "--faith-baseline", str(base), "--faith-update-baseline").ret == 0
    assert list(json.loads(base.read_text())["fingerprint"]["models"]) == ["clip-a"]
    assert usage_error(pytester, "--faith-baseline", str(base), "--faith-model", "clip-b=reference:clip") == (
        f"ERROR: --faith-baseline {base}: it records models clip-a; this run has clip-b: none match, so "
        "nothing would be compared (name the model LABEL=SPEC with the baseline's label, or pass "
        "--faith-allow-missing)")
    for ok in (("--faith-model", "clip-a=reference:clip"), ("--faith-model", "clip-b=reference:clip",
                                                           "--faith-allow-missing")):
        assert pytester.runpytest(*PLUGINS, "--faith-baseline", str(base), *ok).ret == 0


def test_cecs_window_outside_the_model_is_an_error_not_a_skip() -> None:
    """Checked when the model's depth is known: a WindowOptionError (the test errors), never the
    CecsUnavailable that skipped the CECS tests."""
    from types import SimpleNamespace

    from faithtests.data.invalid import Counted
    from faithtests.protocols.acbench.fixtures import AcData, CecsUnavailable
    from faithtests.protocols.acbench.run import Usable
    from faithtests.protocols.acbench.steering import WindowOptionError

    vlm = SimpleNamespace(num_layers=4, spec="hf:tiny")
    data = AcData("world", Usable(), Counted(), 0, vlm, window_option=(30, 40))  # type: ignore[arg-type]
    with pytest.raises(WindowOptionError) as e:
        data.window()
    assert not isinstance(e.value, CecsUnavailable)
    assert str(e.value) == ("--faith-cecs-window 30-40 is not within the model's decoder layers 0..3: pick a "
                            "window inside them (or leave the option out)")


def test_device_check_imports_no_torch_for_cpu() -> None:
    """The plugin stays torch-free at load and for cpu/auto (torch only for an explicit accelerator)."""
    import subprocess
    import sys

    code = ("import sys; from faithtests.plugin.usage import check_device; check_device('cpu'); "
            "check_device('auto'); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "False"
