"""``--faith-api-estimate`` through the plugin (faithtests.plugin.api_cost), serial and under ``-n 2``.

No server: the probe at load is replaced by its findings (an endpoint with log-probabilities that scores
given replies), and the endpoint's URL is a closed port, so any request past the probe would fail the
run. What a real server is sent, estimate against real run, is tested in tests/served.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("openai")

from faithtests.models.api_estimate import Tally
from faithtests.plugin.api_cost import EstimateSummary, endpoint_table
from faithtests.plugin.options import FaithOptions

PLUGINS = ("-p", "faithtests.plugin", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:anyio")
API = "api=openai:m@http://127.0.0.1:9/v1"

CONFTEST = """
from faithtests.models import openai_api

def probe(self):  # what a probe of an endpoint like vLLM finds, without a request
    self.served = {"model": self.model, "system_fingerprint": "fp", "version": "1"}
    self.capabilities.update(images="yes", logprobs="yes", reply_scores="yes")
    self.requests = self.probe_requests = 2

openai_api.OpenAIModel.probe = probe
"""

ALPHA = """
import pytest
from PIL import Image
from faithtests.models.interfaces import Prompt

IMG = Image.new("RGB", (8, 8), "red")

@pytest.mark.parametrize("k", range(4))
def test_generated(faith, faith_vlm, k):
    prompts = [Prompt(images=(IMG,), text=f"q{k}-{i}") for i in range(3)]
    replies = faith_vlm.generate([*prompts, prompts[0]], max_new_tokens=8)  # a repeat: asked once
    faith.metric("answered", float(sum(bool(r) for r in replies)) / 4, n=4)
    faith.check("answered", ">=", 0.5)  # fails on the placeholders: reported skipped, not failed

def test_needs_an_answer(faith, faith_vlm):
    reply = faith_vlm.generate([Prompt(images=(), text="say something")], max_new_tokens=8)[0]
    assert reply, "no answer"  # stops on the placeholder: skipped, named in the summary
"""

BETA = """
from PIL import Image
from faithtests.models.interfaces import Prompt

IMG = Image.new("RGB", (8, 8), "blue")

def test_letters(faith, faith_vlm):
    pair = [Prompt(images=(IMG, IMG), text=f"pick {i}") for i in range(2)]
    faith.metric("rows", float(faith_vlm.option_logits(pair, ["A", "B"]).shape[0]), n=2)
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_alpha=ALPHA, test_beta=BETA)
    return pytester


def _table(text: str) -> dict[str, tuple[int, ...]]:
    """suite -> (to send, cached, images, more) from the printed table."""
    rows = re.findall(r"^  (\w+)\s+([\d,]+)\s+([\d,]+)\s+([\d,]+)\s+([\d,]+)$", text, re.MULTILINE)
    return {r[0]: tuple(int(x.replace(",", "")) for x in r[1:]) for r in rows}


WANT = {"alpha": (13, 0, 12, 0), "beta": (2, 0, 4, 4), "total": (15, 0, 16, 4)}


def test_the_estimate_counts_per_suite_skips_the_tests_and_writes_nothing(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess(*PLUGINS, "--faith-vlm", API, "--faith-vlm", "reference:vlm",
                                          "--faith-api-estimate", "--faith-report", "rep", "-rs")
    out = result.stdout.str()
    result.assert_outcomes(skipped=6, deselected=6)  # every test of reference:vlm deselected
    assert result.ret == 0, out
    assert _table(out) == WANT
    assert "--faith-api-estimate: counted 3 request(s) to send, sent none" in out
    assert "sent: 2 request(s), the probe at load (nothing after it)" in out
    assert "deselected 6 test(s) of in-process models (reference:vlm)" in out
    assert "1 test(s) stopped on the placeholder answers" in out
    assert "test_alpha.py::test_needs_an_answer[api] (AssertionError: no answer" in out
    assert "'answers may add up to'" in out  # reply scores: up to one more request per listed letter
    assert not (project.path / "rep").exists()  # no report, no lock, nothing superseded


def test_workers_add_up_to_the_serial_estimate(project: pytest.Pytester) -> None:
    """``--dist load`` spreads one endpoint's tests over two workers, each loading (and counting for)
    its own copy: the controller's sums are the serial table."""
    result = project.runpytest_subprocess(*PLUGINS, "-p", "xdist", "-n", "2", "--dist", "load",
                                          "--faith-vlm", API, "--faith-api-estimate")
    out = result.stdout.str()
    assert result.ret == 0, out
    assert _table(out) == WANT
    assert re.search(r"sent: [24] request\(s\)", out)  # one probe per worker that loaded the endpoint


def test_an_estimate_without_an_endpoint_or_with_a_baseline_to_write_is_a_usage_error(
        project: pytest.Pytester) -> None:
    none = project.runpytest_subprocess(*PLUGINS, "--faith-vlm", "reference:vlm", "--faith-api-estimate")
    assert none.ret == pytest.ExitCode.USAGE_ERROR
    assert "names none (--faith-vlm LABEL=openai:MODEL@BASE_URL)" in none.stderr.str()
    base = project.runpytest_subprocess(*PLUGINS, "--faith-vlm", API, "--faith-api-estimate",
                                        "--faith-baseline", "b.json", "--faith-update-baseline")
    assert base.ret == pytest.ExitCode.USAGE_ERROR
    assert "drop --faith-update-baseline" in base.stderr.str()


def test_the_summary_says_where_the_count_is_a_bound() -> None:
    """A suite whose protocol declares answer-dependent requests (difference consistency's naming
    question) is a lower bound; a suite without is exact; the answers column appears only when used."""
    summary = EstimateSummary(FaithOptions(report_dir=Path("r")))
    summary.add_report({"suite": "difference_consistency",
                        "counts": {"openai:m@u": {"requests": 30, "images": 60, "sent": 2}}})
    summary.add_report({"suite": "flip_sensitivity", "counts": {"openai:m@u": {"requests": 9, "cached": 3}}})
    summary.add_report({"suite": "flip_sensitivity", "counts": {"openai:m@u": {"requests": 1, "images": 1}}})
    lines = summary.lines(width=None)
    assert "difference_consistency: a lower bound: the naming question" in "\n".join(lines)
    assert not any(line.startswith("flip_sensitivity:") for line in lines)
    assert _table("\n".join(lines) + "\n") == {}  # no 'answers' column: 4 numbers a row, not 5
    rows = {line.split()[0]: line.split()[1:] for line in lines if line.startswith("  ")}
    assert rows["flip_sensitivity"] == ["10", "3", "1"] and rows["total"] == ["40", "3", "61"]
    assert "so the count is exact except where said below;" in "\n".join(lines)
    exact = EstimateSummary(FaithOptions(report_dir=Path("r")))
    exact.add_report({"suite": "flip_sensitivity", "counts": {"openai:m@u": {"requests": 9}}})
    assert "so the count is exact;" in "\n".join(exact.lines())
    assert "answers may add up to" in endpoint_table({"s": Tally(requests=1, more=2)})[0]
