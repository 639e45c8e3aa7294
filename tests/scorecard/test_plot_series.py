"""Plots take any series: constant, one ulp apart, near the float range's ends, a single point, NaN and
inf (issue 43: two values one float step apart sent ``nice_ticks`` into an endless loop that grew memory
until the run was killed). Each rendering must finish well under a second; a SIGALRM turns a hang into a
failure instead of a stuck test run."""

from __future__ import annotations

import math
import signal
import sys
import time
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from faithtests.reports.plot_axes import ThresholdLine, nice_ticks, y_range
from faithtests.reports.plot_dots import DotRow, render_dots
from faithtests.reports.plots import render_plot
from faithtests.scorecard.model import Plot, Series

FLOATS = st.floats(allow_nan=True, allow_infinity=True)
FINITE = st.floats(allow_nan=False, allow_infinity=False)


@pytest.fixture(autouse=True)
def alarm() -> Iterator[None]:
    """Fail (not hang) when one example takes more than 5 s: a loop without a bound."""
    def boom(*_: object) -> None:
        raise TimeoutError("plotting did not finish: a loop without a bound")

    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(60)  # per test (hypothesis runs many examples inside one call)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def timed(fn: object, *args: object, **kwargs: object) -> object:
    start = time.perf_counter()
    out = fn(*args, **kwargs)  # type: ignore[operator]
    assert time.perf_counter() - start < 1.0
    return out


def near_each_other() -> st.SearchStrategy[list[float]]:
    """Series whose values sit a few ulps apart: the case that looped."""
    return FINITE.flatmap(lambda v: st.lists(st.integers(0, 3), min_size=1, max_size=6).map(
        lambda ks: [_ulps(v, k) for k in ks]))


def _ulps(v: float, k: int) -> float:
    for _ in range(k):
        v = math.nextafter(v, math.inf)
    return v if math.isfinite(v) else sys.float_info.max


SERIES = st.one_of(st.lists(FLOATS, min_size=1, max_size=8), near_each_other(),
                   st.lists(st.sampled_from([0.0, 1e300, -1e300, sys.float_info.max, -sys.float_info.max,
                                             5e-324, 1.0, math.nan]), min_size=1, max_size=5))


@settings(max_examples=150, deadline=None)
@given(values=SERIES, kind=st.sampled_from(["line", "bar", "scatter"]),
       threshold=st.one_of(st.none(), FINITE))
def test_any_series_renders_quickly(values: list[float], kind: str, threshold: float | None) -> None:
    ys = [None if math.isnan(v) else v for v in values]
    x: list[float | str] = ([f"c{i}" for i in range(len(ys))] if kind == "bar" else
                            [float(i) for i in range(len(ys))])
    plot = Plot(title="t", kind=kind, series=[Series("s", x, ys, ys, ys)])  # type: ignore[arg-type]
    lines = [ThresholdLine(threshold, ">=")] if threshold is not None else []
    svg = timed(render_plot, plot, thresholds=lines)
    assert isinstance(svg, str) and svg.startswith("<svg") and "nan" not in svg.lower().replace("n/a", "")


@settings(max_examples=150, deadline=None)
@given(values=SERIES)
def test_any_dot_rows_render_quickly(values: list[float]) -> None:
    rows = [DotRow(f"r{i}", v, v, v, ThresholdLine(v, ">="), v, "pass") if math.isfinite(v) else
            DotRow(f"r{i}", v) for i, v in enumerate(values)]
    svg = timed(render_dots, "t", rows)
    assert isinstance(svg, str) and svg.startswith("<svg")
    assert 'cx="nan' not in svg and 'cx="inf' not in svg


@settings(max_examples=300, deadline=None)
@given(values=st.lists(FINITE, min_size=1, max_size=6) | near_each_other())
def test_ticks_are_bounded_sorted_and_cover_the_range(values: list[float]) -> None:
    rng = y_range(values, include_zero=False)
    assert rng is not None
    lo, hi = rng
    assert math.isfinite(lo) and math.isfinite(hi) and lo < hi
    ticks = timed(nice_ticks, lo, hi)
    assert isinstance(ticks, list) and 1 <= len(ticks) <= 50
    assert ticks == sorted(set(ticks))
    assert all(lo <= t <= hi or math.isclose(t, lo) or math.isclose(t, hi) for t in ticks)


def test_the_case_that_looped() -> None:
    """Mllama's plot: two values one float step apart (issue 43)."""
    a = 0.4375
    b = math.nextafter(a, 1.0)
    lo, hi = y_range([a, b], include_zero=False) or (0.0, 0.0)
    assert lo < a and hi > b  # widened as a constant series: 10% either side
    assert timed(nice_ticks, lo, hi) == [0.4, 0.42, 0.44, 0.46, 0.48]
    assert nice_ticks(1.0, math.nextafter(1.0, 2.0)) in ([1.0], [1.0, math.nextafter(1.0, 2.0)])


def test_ticks_of_an_ordinary_range_are_unchanged() -> None:
    """The values the accumulating loop gave before (checked against its code at f5f0593)."""
    assert nice_ticks(0.0, 1.0) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert nice_ticks(-0.13, 0.62) == [0.0, 0.2, 0.4, 0.6]
    assert nice_ticks(3.0, 3.0) == [3.0]
    with pytest.raises(ValueError, match="finite lo <= hi"):
        nice_ticks(1.0, math.inf)
