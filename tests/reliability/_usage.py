"""Shared by the reliability corpus: run pytest with the plugin and read back its one usage error."""

from __future__ import annotations

import pytest

PLUGINS = ("-p", "faithtests.plugin", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:anyio",
           "-W", "ignore::pytest.PytestAssertRewriteWarning")


def minimal_project(pytester: pytest.Pytester,
                    test_src: str = "def test_a():\n    pass\n") -> pytest.Pytester:
    """A project of one test (``test_src``) and an empty ``suites/thresholds.toml``."""
    pytester.makepyfile(test_a=test_src)
    (pytester.path / "suites").mkdir()
    (pytester.path / "suites" / "thresholds.toml").write_text("")
    return pytester


def usage_error(pytester: pytest.Pytester, *args: str) -> str:
    """Run, assert exit 4 before any test ran (no INTERNALERROR), and return the one ``ERROR:`` line."""
    result = pytester.runpytest(*PLUGINS, *args)
    out = result.stdout.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, (result.ret, out, result.stderr.str())
    assert "passed" not in out and "INTERNALERROR" not in out + result.stderr.str()
    errors = [line for line in result.stderr.lines if line.startswith("ERROR:")]
    assert len(errors) == 1, result.stderr.str()
    return errors[0]
