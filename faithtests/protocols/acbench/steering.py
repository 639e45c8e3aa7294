"""CECS steering for real adapter calls (§5, App. D): the hooks of one prompt's call, the monitor of what
they changed, the rows the hard gate opens, and the intervention window with the rule that chose it.
No model is called here (``run.py`` calls it); the reallocation itself is :mod:`.cecs`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from faithtests.models.interfaces import Hooks, TokenSpans
from faithtests.protocols.acbench.cecs import PAPER_WINDOWS, TAU, cecs_hooks, window_from_lss

if TYPE_CHECKING:
    import torch


@dataclass
class MassMonitor:
    """What the CECS modifier did to real attention rows (one row = one head's query over the keys):
    ``rows`` changed, ``max_sum_err`` = max |Σ_k ŵ − 1| over them (float64 sums of the returned
    weights), ``max_shift`` = max |Σ_k ŵ − Σ_k w| (the update's own mass change, Eq. 13)."""

    rows: int = 0
    calls: int = 0
    max_sum_err: float = 0.0
    max_shift: float = 0.0

    def observe(self, before: torch.Tensor, after: torch.Tensor) -> None:
        self.calls += 1
        changed = (after != before).any(dim=-1)
        if not bool(changed.any()):
            return
        s_after = after.double().sum(-1)[changed]
        s_before = before.double().sum(-1)[changed]
        self.rows += int(changed.sum())
        self.max_sum_err = max(self.max_sum_err, float((s_after - 1.0).abs().max()))
        self.max_shift = max(self.max_shift, float((s_after - s_before).abs().max()))


def steering_hooks(
    s: float,
    window: tuple[int, int],
    *,
    prompt_length: int | None = None,
    monitor: MassMonitor | None = None,
    **params: Any,
) -> Hooks:
    """``cecs.cecs_hooks(s, window, **params)`` for one prompt's call, each modifier wrapped to see
    ``prompt_length`` as every row's length (constrained calls: the answer query is the prompt's last
    token, not the label's; module doc) and to report to ``monitor``. The tag carries both."""
    base = cecs_hooks(s, window, **params)

    def wrap(fn: Any) -> Any:
        def modifier(layer: int, weights: torch.Tensor, spans: TokenSpans) -> torch.Tensor:
            seen = (
                spans if prompt_length is None else replace(spans, length=[prompt_length] * len(spans.length))
            )
            out: torch.Tensor = fn(layer, weights, seen)
            if monitor is not None and out is not weights:
                monitor.observe(weights, out)
            return out

        return modifier

    tag = f"{base.tag},answer_at={'prompt_end' if prompt_length is None else prompt_length}"
    # A monitored call must run: a stored output would skip the observations (no tag: never stored).
    attention = {k: wrap(f) for k, f in base.attention.items()}
    return Hooks(attention=attention, tag=None if monitor is not None else tag)


def active_rows(s: NDArray[np.float64], tau: float = TAU) -> list[int]:
    """Rows the hard gate steers: s ≥ τ (a NaN score never is)."""
    return [int(i) for i in np.flatnonzero(np.isfinite(s) & (s >= tau))]


def choose_window(
    num_layers: int,
    spec: str,
    lss_mean: NDArray[np.float64] | None,
    option: tuple[int, int] | None = None,
    curve_name: str = "base LSS",
    paper_windows: Mapping[str, tuple[int, int]] = PAPER_WINDOWS,
) -> tuple[tuple[int, int], str]:
    """(window, the rule that chose it): the user's option; else the paper's window for the model by
    name (the repo id, or a local folder with the repo's name: App. D.3's 17–24 for Qwen3-VL-8B);
    else ``cecs.window_from_lss`` on the model's own ``lss_mean`` curve. A window outside the model's
    layers, or a curve without a sink, is a ValueError naming why."""
    if option is not None:
        return _in_range(option, num_layers, "the window option"), "option --faith-cecs-window"
    name = spec.removeprefix("hf:").rstrip("/")
    for repo, w in paper_windows.items():
        if name == repo or name.endswith("/" + repo.rsplit("/", 1)[-1]):
            return _in_range(w, num_layers, f"the paper's window for {repo}"), f"paper window of {repo}"
    if lss_mean is None:
        raise ValueError("no CECS window: no option, no paper window for this model, and no LSS curve")
    w = window_from_lss(lss_mean)
    return w, f"window_from_lss on the {curve_name} curve"


class WindowOptionError(ValueError):
    """``--faith-cecs-window`` names layers the model does not have: the user's mistake, reported as an
    error once the model's depth is known (never a skipped CECS test)."""


def check_window_option(option: tuple[int, int], num_layers: int) -> None:
    """WindowOptionError when ``option`` is not within the model's decoder layers."""
    first, last = int(option[0]), int(option[1])
    if not 0 <= first <= last < num_layers:
        raise WindowOptionError(f"--faith-cecs-window {first}-{last} is not within the model's decoder "
                                f"layers 0..{num_layers - 1}: pick a window inside them (or leave the option "
                                "out)")


def _in_range(w: tuple[int, int], num_layers: int, what: str) -> tuple[int, int]:
    first, last = int(w[0]), int(w[1])
    if not 0 <= first <= last < num_layers:
        raise ValueError(f"{what} {w} is not within the model's decoder layers 0..{num_layers - 1}")
    return first, last
