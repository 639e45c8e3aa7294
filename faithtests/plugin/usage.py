"""Usage errors of the model options, raised at configure time before any model loads (exit 4, one
``ERROR:`` line): a device this machine does not have, a batch size below 1, a threshold family no
adapter declares, a baseline recorded for none of this run's models. Also xdist's worker-restart default.

torch is imported only to check an explicit ``--faith-device cuda[:N]`` / ``mps`` (the one question only
torch can answer: is that device here); plugin load and every other check stay torch-free.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable

import pytest

from faithtests.models.checks import BUILTIN_FAMILIES, is_plugin_spec, unknown_families
from faithtests.plugin.options import ModelSpec, get_options
from faithtests.scorecard.scorecard import Scorecard
from faithtests.scorecard.thresholds import Thresholds

_DEVICE = re.compile(r"^(auto|cpu|mps|cuda(:(?P<index>\d+))?)$")
#: xdist restarts a crashed worker 4 x -n times by default, so a model that crashes its process on load is
#: loaded (and crashes) again and again: one restart absorbs a one-off crash, a second crash stops the run.
MAX_WORKER_RESTART = 1


def check_device(text: str, *, present: bool = True) -> None:
    """``--faith-device``: ``auto``, ``cpu``, ``mps``, ``cuda`` or ``cuda:N``, and (``present``) on this
    machine."""
    device = text.strip()
    m = _DEVICE.match(device)
    if m is None:
        raise pytest.UsageError(f"--faith-device: {device!r} is not a device "
                                "(auto, cpu, cuda, cuda:N or mps)")
    if device in ("auto", "cpu") or not present:
        return
    import torch  # lazy: torch, only for an explicit accelerator: whether it is here is torch's to say

    if device == "mps":
        if not torch.backends.mps.is_available():
            raise pytest.UsageError("--faith-device mps: MPS is not available on this machine "
                                    "(use cpu or auto)")
        return
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count == 0:
        raise pytest.UsageError(f"--faith-device {device}: no CUDA device on this machine "
                                "(torch.cuda.is_available() is False); use --faith-device cpu or auto")
    index = int(m["index"]) if m["index"] is not None else 0
    if index >= count:
        raise pytest.UsageError(f"--faith-device {device}: this machine has {count} CUDA device(s), "
                                f"cuda:0..cuda:{count - 1}")


def check_batch_size(value: object) -> None:
    if not isinstance(value, int) or value < 1:
        raise pytest.UsageError(f"--faith-batch-size must be >= 1, got {value}")


def threshold_families(th: Thresholds) -> dict[str, str]:
    """Every family a thresholds entry names -> where (``suite.key`` and its source file)."""
    out: dict[str, str] = {}
    for suite in th.suites():
        for key, t in th.entries(suite).items():
            for fam in t.family:
                out.setdefault(fam, f"[{suite}] {key} (from {t.source})")
    return out


def check_families(th: Thresholds, specs: Iterable[ModelSpec]) -> None:
    """A family no adapter declares (typo ``siglp``) would never apply, silently: a usage error naming
    it, unless the run has a plug-in model (``py:`` or an entry point), whose family only it knows."""
    if any(is_plugin_spec(m.spec) for m in specs):
        return
    named = threshold_families(th)
    for fam in unknown_families(sorted(named)):
        close = difflib.get_close_matches(fam, BUILTIN_FAMILIES, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise pytest.UsageError(
            f"faithtests thresholds: family {fam!r} in {named[fam]} is declared by no model adapter{hint}; "
            f"families: {', '.join(BUILTIN_FAMILIES)} or an HF config's model_type")


def check_baseline_labels(config: pytest.Config, labels: Iterable[str]) -> None:
    """A baseline whose models (the labels its fingerprint recorded from the loaded adapters) are none of
    this run's models would gate nothing, every result missing: an error now, before any model loads,
    not after the run. Not with --faith-update-baseline (it is replaced) or --faith-allow-missing (renamed
    labels allowed). A baseline that recorded no model (plain ``faith`` tests) is not checked here: its
    missing results fail the gate at the end, as before."""
    opts = get_options(config)
    controller = config.pluginmanager.get_plugin("faithtests-controller")
    baseline: Scorecard | None = getattr(controller, "baseline", None)
    if baseline is None or opts.update_baseline or opts.allow_missing:
        return
    recorded = sorted(baseline.fingerprint.get("models") or {})
    mine = sorted(set(labels))
    if recorded and mine and not set(recorded) & set(mine):
        raise pytest.UsageError(
            f"--faith-baseline {opts.baseline}: it records models {', '.join(recorded)}; this run has "
            f"{', '.join(mine)}: none match, so nothing would be compared (name the model LABEL=SPEC with "
            "the baseline's label, or pass --faith-allow-missing)")


def default_max_worker_restart(config: pytest.Config) -> None:
    """Set xdist's ``--max-worker-restart`` to :data:`MAX_WORKER_RESTART` when the user gave none."""
    option = config.option
    if getattr(option, "numprocesses", None) and getattr(option, "maxworkerrestart", "") is None:
        option.maxworkerrestart = str(MAX_WORKER_RESTART)
