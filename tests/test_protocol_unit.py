"""Issue 32: a protocol is one unit. A tiny protocol package made here (a manifest with one option and
one data name, a fixtures module, a suite file, a thresholds table), registered from another
distribution through the ``faithtests.protocols`` entry-point group, is collected, registers its option
and its data name, runs and records, with no edit anywhere in faithtests."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

MANIFEST = '''
import pytest

from faithtests.config import Option
from faithtests.data.names import DataName
from faithtests.manifest import Manifest


def _level(raw, source):
    try:
        return float(str(raw))
    except ValueError:
        raise pytest.UsageError(f"--faith-tiny-level: {raw!r} is not a number") from None


LEVEL = Option("faith_tiny_level", "the tiny protocol's level", default="0.75", parse=_level, metavar="X",
               section="Tiny")

MANIFEST = Manifest(
    name="tiny", title="Tiny", paper="A tiny paper", suites=("tiny",), fixtures="tinyproto.fixtures",
    data={"tinydata": DataName("file", "a file holding one number")}, options=(LEVEL,), bootstrap=100,
)
'''

FIXTURES = '''
import pytest

from faithtests.config import run_config
from tinyproto.manifest import LEVEL

_LEVEL = pytest.StashKey[float]()


@pytest.hookimpl(trylast=True)  # after the plugin read every option once (a bad value: a usage error)
def pytest_configure(config):
    config.stash[_LEVEL] = run_config(config).option(LEVEL)


@pytest.fixture
def tiny_value(request):
    """The option's value, or the number in --faith-data tinydata=FILE."""
    data = run_config(request.config).data
    if "tinydata" in data:
        return float(data["tinydata"].read_text())
    return request.config.stash[_LEVEL]
'''

SUITE = '''
def test_tiny(faith, tiny_value):
    faith.metric("tiny_score", tiny_value, n=100)
    faith.check("tiny_score")
'''

THRESHOLDS = '''[tiny]
# recorded by the tiny example protocol of tests/test_protocol_unit.py (not a paper's number)
tiny_score = { op = ">=", value = 0.5 }
'''


@pytest.fixture
def tiny(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    site = pytester.path / "site"
    pkg = site / "tinyproto"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "manifest.py").write_text(MANIFEST)
    (pkg / "fixtures.py").write_text(FIXTURES)
    dist = site / "tinyproto-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tinyproto\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[faithtests.protocols]\ntiny = tinyproto.manifest:MANIFEST\n")
    (pytester.path / "suites").mkdir()
    (pytester.path / "suites" / "test_tiny.py").write_text(SUITE)
    (pytester.path / "suites" / "thresholds.toml").write_text(THRESHOLDS)
    (pytester.path / "value.txt").write_text("0.25")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    return pytester


ARGS = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:anyio")


def _results(path: Path) -> dict[str, dict[str, object]]:
    sc = json.loads((path / "scorecard.json").read_text())
    return {str(r["metric"]): r for r in sc["results"]}


def test_tiny_protocol_is_collected_runs_and_records(tiny: pytest.Pytester) -> None:
    collected = tiny.runpytest_subprocess(*ARGS, "suites", "--collect-only", "-q")
    collected.stdout.fnmatch_lines(["suites/test_tiny.py::test_tiny"])
    result = tiny.runpytest_subprocess(*ARGS, "suites", "--faith-report", "out")
    result.assert_outcomes(passed=1)
    score = _results(tiny.path / "out")["tiny_score"]
    assert score["value"] == 0.75 and score["suite"] == "tiny" and score["passed"] is True


def test_tiny_option_is_registered_and_read(tiny: pytest.Pytester) -> None:
    helped = tiny.runpytest_subprocess(*ARGS, "--help")
    helped.stdout.fnmatch_lines(["*--faith-tiny-level=X*", "*faith_tiny_level (string):*"])
    result = tiny.runpytest_subprocess(*ARGS, "suites", "--faith-report", "out", "--faith-tiny-level", "0.9")
    result.assert_outcomes(passed=1)
    assert _results(tiny.path / "out")["tiny_score"]["value"] == 0.9
    tiny.makeini("[pytest]\nfaith_tiny_level = 0.4\n")  # ini, below the command line; fails its check
    result = tiny.runpytest_subprocess(*ARGS, "suites", "--faith-report", "out")
    result.assert_outcomes(failed=1)
    assert _results(tiny.path / "out")["tiny_score"]["value"] == 0.4
    bad = tiny.runpytest_subprocess(*ARGS, "suites", "--faith-tiny-level", "high")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["ERROR: --faith-tiny-level: 'high' is not a number"])


def test_tiny_data_name_is_accepted_and_an_unknown_one_refused(tiny: pytest.Pytester) -> None:
    result = tiny.runpytest_subprocess(*ARGS, "suites", "--faith-report", "out", "--faith-data",
                                       "tinydata=value.txt")
    result.assert_outcomes(failed=1)  # 0.25 < 0.5: the number came from the file
    assert _results(tiny.path / "out")["tiny_score"]["value"] == 0.25
    bad = tiny.runpytest_subprocess(*ARGS, "suites", "--faith-data", "tinydat=value.txt")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["ERROR: --faith-data: unknown dataset 'tinydat' (did you mean 'tinydata'?)*"])
    folder = tiny.runpytest_subprocess(*ARGS, "suites", "--faith-data", "tinydata=suites")
    assert folder.ret == pytest.ExitCode.USAGE_ERROR
    folder.stderr.fnmatch_lines(["ERROR: --faith-data tinydata: * is a folder; expected a file"])


BROKEN = {  # what a third-party manifest gets wrong -> the words of its own message
    "reads": ('data={"tinydata": DataName("file", "a file holding one number")}',
              'data={"tinydata": DataName("file", "a file holding one number")}, reads=("cocoo",)',
              "reads 'cocoo', which is no shared data name"),
    "data name": ('data={"tinydata": DataName("file", "a file holding one number")}',
                  'data={"imavb": DataName("file", "a file holding one number")}',
                  "data name 'imavb' is declared twice"),
    "import": ("import pytest\n", "import pytest\nimport no_such_module_anywhere\n",
               "No module named 'no_such_module_anywhere'"),
    # the glossary declares each metric's direction, read when the run starts: a broken one would stop it
    "glossary": ("bootstrap=100,", 'bootstrap=100, glossary="tinyproto.no_terms:TERMS",',
                 "glossary 'tinyproto.no_terms:TERMS' cannot be loaded"),
}


@pytest.mark.parametrize("mistake", list(BROKEN))
def test_a_broken_protocol_plugin_disables_itself_only(tiny: pytest.Pytester, mistake: str) -> None:
    """Issue 46: a broken third-party protocol made every faithtests command die with a traceback and
    stopped an unrelated project's pytest in the same environment (exit 3), its own message hidden behind
    ``PluginImportFailure``. It now disables itself with its own message; everything else runs."""
    old, new, words = BROKEN[mistake]
    manifest = tiny.path / "site" / "tinyproto" / "manifest.py"
    manifest.write_text(manifest.read_text().replace(old, new, 1))
    other = tiny.path / "other"
    other.mkdir()
    (other / "test_unrelated.py").write_text("def test_one():\n    assert 1 + 1 == 2\n")
    unrelated = tiny.runpytest_subprocess(*ARGS, str(other), "-W", "default")
    unrelated.assert_outcomes(passed=1)
    assert unrelated.ret == 0
    said = unrelated.stdout.str() + unrelated.stderr.str()
    assert "protocol plug-in tiny = tinyproto.manifest:MANIFEST (faithtests.protocols) is disabled" in said
    assert words in said
    cli = tiny.run(sys.executable, "-m", "faithtests.cli", "explain", "Bal")
    assert cli.ret == 0 and "Balanced accuracy" in cli.stdout.str()
    assert "warning: faithtests: protocol plug-in tiny" in cli.stderr.str() and words in cli.stderr.str()
