"""Quick runs that can pass (issue 49, item 2): ``--faith-profile`` names run sizes, ``RunConfig.capped``
applies them per protocol, SPD-Faith's world keeps whole strata under ``--faith-limit``, and an
INSUFFICIENT reason says which limit would give a verdict. The profiles on the real suites (quick exits 0
on every seed, a quick run is a quick run's baseline) are in tests/seeds (the CI's seed sweep)."""

from __future__ import annotations

import json

import numpy  # noqa: F401  (inline runs restore sys.modules; numpy cannot be imported twice)
import pytest

from faithtests.config import RunConfig
from faithtests.plugin.option_table import PROFILES, profile_limits
from faithtests.protocols.spdfaith.fixtures import SPD_WORLD_PAIRS, world_pairs
from faithtests.scorecard.coverage import limit_hint, short_of_data
from faithtests.scorecard.model import MetricResult

PLUGINS = ("-p", "faithtests.plugin", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:anyio")
TRIVIAL = """
def test_ok(faith):
    faith.metric("x", 1.0)
"""


def test_capped_applies_the_limit_the_factor_and_a_protocols_own_limit() -> None:
    assert RunConfig().capped(30) == 30 and RunConfig(limit=24).capped(30) == 24
    assert RunConfig(scale=2).capped(30) == 60 and RunConfig(limit=40, scale=2).capped(30) == 40
    quick = RunConfig(limit=24, limits={"lgip": None, "acbench": 12})
    assert (quick.capped(64, "lgip"), quick.capped(30, "acbench"), quick.capped(30, "s3e")) == (64, 12, 24)
    assert quick.capped(64) == 24  # no protocol named: the run's limit
    assert profile_limits("quick") == {"lgip": None, "imavb": 48, "imavb-clips": None,
                                       "acbench": 12}
    assert profile_limits("default") == {}


def test_spd_world_keeps_whole_strata() -> None:
    """The world's pairs cycle five strata; N per stratum under --faith-limit N (at 40 each of the five
    got 8 of its 10 needed before)."""
    assert world_pairs(RunConfig()) == SPD_WORLD_PAIRS == 150
    assert world_pairs(RunConfig(limit=16)) == 80 and world_pairs(RunConfig(limit=40)) == 150
    assert world_pairs(RunConfig(scale=2)) == 300


def test_insufficient_reasons_name_the_limit_that_would_do() -> None:
    assert limit_hint(8, 10, 40) == "; --faith-limit 50 gives about 10" and limit_hint(8, 10, None) == ""
    r = MetricResult("s", "t.py::t", "PR", 0.79, model="m", ci=(0.66, 0.92), n=100)
    (why,) = short_of_data(r, "point", False, ">=", 0.80, 24, None)
    # the CI's threshold-side half-width 0.13 against a gap of 0.01: n = 100 x (0.13 / 0.01)^2 = 16900,
    # a limit of 24 x 16900 / 100 = 4056
    assert why.endswith("about 16900 items would resolve a gap of 0.01 (the CI half-width 0.13 shrinks as "
                        "1/sqrt(n)); --faith-limit 4056 gives about 16900"), why


def test_profiles_parse_and_are_recorded(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_t=TRIVIAL)
    result = pytester.runpytest(*PLUGINS, "--faith-profile", "quick", "--faith-limit", "10")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert ("--faith-profile quick runs with --faith-limit 24; --faith-limit 10 contradicts it"
            in result.stderr.str())
    result = pytester.runpytest(*PLUGINS, "--faith-profile", "quick", "--faith-report", "out")
    assert result.ret == 0
    fp = json.loads((pytester.path / "out" / "scorecard.json").read_text())["fingerprint"]
    assert (fp["profile"], fp["limit"]) == ("quick", PROFILES["quick"].limit)
    assert pytester.runpytest(*PLUGINS, "--faith-profile", "huge").ret == pytest.ExitCode.USAGE_ERROR


DIAGNOSTICS = """
import pytest
from faithtests.protocols import diagnostic_params

@pytest.mark.parametrize("variant", diagnostic_params(("base", "extra"), gated=("base",)))
def test_gated(faith, variant):
    faith.metric("x", 1.0)
    if variant == "base":
        faith.check("x", ">=", 0.5)

@pytest.mark.faith_diagnostic
def test_recorded(faith):
    faith.metric("y", 1.0)
"""


def test_quick_leaves_out_the_diagnostics_and_says_so(pytester: pytest.Pytester) -> None:
    """Quick runs the tests that gate something (the diagnostics were 87 of its 134 s); default runs all."""
    pytester.makepyfile(test_t=DIAGNOSTICS)
    quick = pytester.runpytest(*PLUGINS, "--faith-profile", "quick", "-v")
    quick.assert_outcomes(passed=1, deselected=2)
    quick.stdout.fnmatch_lines(["*test_gated?base? PASSED*",
                                "quick profile: 2 test(s) marked faith_diagnostic (they record and gate "
                                "nothing) not run; --faith-profile default runs them"])
    card = json.loads((pytester.path / "faith-report" / "scorecard.json").read_text())
    assert [t["test"] for t in card["tests"]] == ["test_t.py::test_gated[base]"]
    default = pytester.runpytest(*PLUGINS, "-v")
    default.assert_outcomes(passed=3)
    assert "marked faith_diagnostic" not in default.stdout.str()
    parallel = pytester.runpytest_subprocess(*PLUGINS, "-p", "xdist", "-n", "2", "--faith-profile", "quick")
    parallel.stdout.fnmatch_lines(["quick profile: 2 test(s) marked faith_diagnostic *"])  # workers counted


@pytest.mark.parametrize("gates", ['faith.metric("x", 1.0)\n    faith.check("x", ">=", 0.5)',
                                   'faith.rows([MetricRow("x", 1.0, 20, gated=True)], gate=True)'],
                         ids=["check", "gated-row"])
def test_a_diagnostic_mark_on_a_test_that_checks_fails_it(pytester: pytest.Pytester, gates: str) -> None:
    """The mark would hide a gate from quick runs: the test fails, naming the metric (any profile), whether
    the suite checks it or records a row its protocol marks as a gate."""
    pytester.makepyfile(test_t=f"""
import pytest
from faithtests.scorecard.model import MetricRow

pytestmark = pytest.mark.suite("t")

@pytest.mark.faith_diagnostic
def test_checks(faith):
    {gates}
""")
    result = pytester.runpytest(*PLUGINS)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*test_t.py::test_checks is marked faith_diagnostic (gates nothing: quick "
                                 "runs skip it) but checks x: remove the mark*"])
