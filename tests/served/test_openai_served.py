"""``openai:`` against a real ``transformers serve`` of the reference VLM (issue 45), never a mock.

The server runs from its own small venv (``$FAITH_SERVE_VENV``, default ``.venv-serve`` in the checkout:
CPU torch + ``transformers[serving]``), started here by PID on a free loopback port and stopped by that
PID (:mod:`faithtests.testing.servers`). Without that venv the tests skip with the reason (under
``CI=true`` they fail). vLLM's CPU build serves it too, from ``$FAITH_VLLM_VENV``.

Not part of ``pytest tests/`` (they need the two server venvs, and minutes of server start-up):
``.ci/run`` runs them, ``FAITH_SERVED=1 pytest tests/served``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("openai")

from faithtests.models.errors import NotApplicable
from faithtests.models.interfaces import Prompt
from faithtests.models.locations import fixtures_root
from faithtests.testing import servers

ROOT = servers.ROOT

#: How far a served log-probability difference may sit from the in-process one: vLLM's CPU float32
#: kernels against torch's eager ones (measured 1.4e-5 on 60 six-option questions, 9.5e-6 on 40 with
#: every letter scored).
LOGPROB_TOLERANCE = 1e-4


def _venv_or_skip(kind: str) -> Path:
    venv = servers.venv(kind)
    if not venv.is_dir():
        why = f"no {kind} venv at {venv} (docs/serving.md)"
        if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes"):
            pytest.fail(f"CI=true and {why}")
        pytest.skip(why)
    return venv


def _started(kind: str, tmp: Path) -> Iterator[tuple[str, str, subprocess.Popen[bytes]]]:
    _venv_or_skip(kind)
    port = servers.free_port()
    cmd, name = servers.command(kind, fixtures_root() / "vlm", port)
    with servers.serve(cmd, port, log=tmp / f"{kind}.log") as (url, proc):
        yield f"openai:{name}@{url}", url, proc


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``transformers serve`` of the reference VLM: the ``openai:`` spec."""
    for spec, _, _ in _started("serve", tmp_path_factory.mktemp("serve")):
        yield spec


@pytest.fixture(scope="module")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """vLLM (CPU build) serving the reference VLM in float32 through its transformers backend."""
    for spec, _, _ in _started("vllm", tmp_path_factory.mktemp("vllm")):
        yield spec


@pytest.fixture(scope="module")
def vllm_omni(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """vLLM (CPU build) serving the reference omni model with its own Qwen2.5-Omni implementation
    (video and audio in; servers.omni_for_vllm)."""
    _venv_or_skip("vllm")
    tmp = tmp_path_factory.mktemp("vllm-omni")
    port = servers.free_port()
    cmd, name = servers.omni_command(tmp, port)
    with servers.serve(cmd, port, log=tmp / "vllm.log") as (url, _):
        yield f"openai:{name}@{url}"


def _prompts() -> list[Prompt]:
    from faithtests.protocols.imavb.stimuli import premise_item
    from faithtests.world.render import render

    out = []
    for i in range(4):
        image = render(premise_item(0, i).scene)
        question = "Question: what colour are the circles on the left ? Answer:"
        out.append(Prompt(images=(image,), text=question))
        out.append(Prompt(images=(image,), text="Describe the picture."))
    return out


def test_served_answers_equal_the_in_process_ones(served: str) -> None:
    import faithtests

    api = faithtests.load_model(served)
    local = faithtests.load_model("reference:vlm")
    prompts = _prompts()
    assert api.generate(prompts, max_new_tokens=12) == local.generate(prompts, max_new_tokens=12)


def test_what_the_endpoint_lacks_is_not_applicable_with_the_reason(served: str) -> None:
    import faithtests

    api = faithtests.load_model(served)
    # transformers serve accepts logprobs=True and returns none (issue 45): found once, at load
    assert "returned no top_logprobs" in api.capabilities["logprobs"]
    with pytest.raises(NotApplicable, match="returned no top_logprobs"):
        api.option_logits(_prompts()[:1], ["A", "B"])
    with pytest.raises(NotApplicable, match="returned no top_logprobs"):  # decide needs option logits
        api.decide(_prompts()[:1], ["A", "B"])
    for call in (lambda: api.states(_prompts()[:1]), lambda: api.attentions(_prompts()[:1])):
        with pytest.raises(NotApplicable, match="served model shows no"):
            call()
    assert api.lacks("hidden_states") and api.lacks("logprobs") and not api.lacks("images")


def test_without_logprobs_the_served_model_answers_by_generated_letters(served: str) -> None:
    """IMAVB's A1 prompts answered by a generated letter: the served letters equal the in-process ones
    (both float32), and the run reads no states."""
    import faithtests
    from faithtests.models.letters import generated_by
    from faithtests.protocols.imavb.run import run_choice
    from faithtests.protocols.imavb.sources import world_records

    api, local = faithtests.load_model(served), faithtests.load_model("reference:vlm")
    recs = world_records(4, seed=0)
    why = generated_by(api, "auto")
    assert why.startswith("no option log-probabilities") and generated_by(local, "auto") == ""
    served_run = run_choice(api, recs, generated=why)
    local_run = run_choice(local, recs, generated="--faith-answer-mode generated")
    assert served_run.states is None and served_run.unparsed == local_run.unparsed == {}
    np.testing.assert_array_equal(served_run.logits, local_run.logits)


def test_spd_questions_are_answered_by_generation_on_the_served_model(served: str) -> None:
    """SPD-Faith's Yes / No and count questions on an endpoint without log-probabilities: generated and
    read by the strict one-word rules, equal to the in-process model's generated answers, naming too."""
    import faithtests
    from faithtests.models.letters import generated_by
    from faithtests.protocols.spdfaith.judge import world_judge
    from faithtests.protocols.spdfaith.run import run_variant, usable
    from faithtests.protocols.spdfaith.sources import world_records

    api, local = faithtests.load_model(served), faithtests.load_model("reference:vlm")
    data = usable(world_records(10, seed=0))  # two of each slot: single easy / medium / hard, multi, same
    got = run_variant(api, data, "base", world_judge(), generated=generated_by(api, "auto"))
    want = run_variant(local, data, "base", world_judge(), generated="--faith-answer-mode generated")
    for field in ("p_yes_same", "p_yes_diff", "count"):
        np.testing.assert_array_equal(getattr(got, field), getattr(want, field))
    assert got.replies == want.replies and got.counted.invalid == want.counted.invalid
    assert got.states_same.shape == (0, 10, 0) and set(got.p_yes_same) <= {0.0, 1.0}


def test_the_key_is_never_in_the_fingerprint(served: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import faithtests

    monkeypatch.setenv("FAITH_API_KEY", "sk-secret-do-not-write")
    api = faithtests.load_model(served)
    assert "sk-secret" not in json.dumps(api.fingerprint())
    assert api.fingerprint()["served"]["model"]


def test_vllm_logprobs_match_the_in_process_logits(vllm: str) -> None:
    """IMAVB's six-option questions on 20 world images: every letter's log-probability is a score, not a
    bound (the ones outside the top 20 come from prompt_logprobs), the served argmax is the in-process
    one on every row, and each letter's log-probability minus letter A's equals the in-process logit
    difference within LOGPROB_TOLERANCE (a softmax is shift-invariant)."""
    import torch

    import faithtests
    from faithtests.protocols.imavb.prompts import a1_text
    from faithtests.protocols.imavb.records import LETTERS
    from faithtests.protocols.imavb.stimuli import premise_item
    from faithtests.world.render import render

    api = faithtests.load_model(vllm)
    assert api.capabilities["logprobs"] == "yes" and api.capabilities["reply_scores"] == "yes"
    assert api.served["system_fingerprint"].startswith("vllm") and api.served["version"]
    local = faithtests.load_model("reference:vlm")
    prompts = [Prompt(images=(render(it.scene),), text=a1_text(q.question, q.options))
               for it in (premise_item(0, i) for i in range(20)) for q in (it.standard, it.misleading)]
    served, here = api.option_logits(prompts, LETTERS), local.option_logits(prompts, LETTERS)
    assert bool(torch.isfinite(served).all()) and api.bounded == 0
    assert torch.equal(served.argmax(1), here.argmax(1))
    d_served, d_here = served - served[:, :1], here - here[:, :1]
    assert float((d_served - d_here).abs().max()) < LOGPROB_TOLERANCE
    assert api.generate(prompts[:6], 8) == local.generate(prompts[:6], 8)


def test_a_server_killed_mid_run_is_a_clear_error_and_its_answers_are_kept(tmp_path: Path) -> None:
    """transformers serve killed by its PID between two calls: the second call raises EndpointError
    naming the model (after no retries here), and the first call's answers stay in the output cache."""
    from faithtests.models.errors import EndpointError
    from faithtests.models.openai_api import OpenAIModel, parse_spec
    from faithtests.models.prompt_keys import prompt_key
    from faithtests.models.store import OutputStore

    store = OutputStore(tmp_path / "cache")
    for spec, _, proc in _started("serve", tmp_path):
        model, url = parse_spec(spec.removeprefix("openai:"))
        api = OpenAIModel(spec=spec, model=model, base_url=url, max_retries=0, timeout_s=20)
        api.probe()
        api.use_store(store)
        prompts = _prompts()
        first = api.generate(prompts[:4], max_new_tokens=6)
        servers.stop(proc)  # by PID
        with pytest.raises(EndpointError, match=r"openai:.*Connection error"):
            api.generate(prompts, max_new_tokens=6)
        assert api.generate(prompts[:4], max_new_tokens=6) == first  # read back, no server needed
        ns = f"{api.store_namespace}|generate/6"
        kept = store.get(ns, [prompt_key(p) for p in prompts[:4]])
        assert sorted(v.decode() for v in kept.values()) == sorted(first)


class _FaultProxy:
    """A real HTTP proxy in front of a real server that answers the next requests with the faults queued
    in ``faults`` ("500", "429", "garbage": a 200 whose body is not JSON, "slow": no answer within the
    client's timeout), then forwards again. ``seen`` counts the requests it received, ``completions`` the
    chat completions among them."""

    def __init__(self, upstream: str) -> None:
        import http.server
        import threading

        self.faults: list[str] = []
        self.seen = 0
        self.completions = 0
        lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _forward(self, method: str) -> None:
                import time
                import urllib.error
                import urllib.request

                n = int(self.headers.get("Content-Length") or 0)
                data = self.rfile.read(n) if n else None
                with lock:
                    proxy.seen += 1
                    proxy.completions += self.path.endswith("/completions")
                fault = proxy.faults.pop(0) if proxy.faults and self.path.endswith("/completions") else ""
                if fault in ("500", "429"):
                    return self._send(int(fault), b'{"error": {"message": "injected %s"}}' % fault.encode())
                if fault == "garbage":
                    return self._send(200, b"<html>not json")
                if fault == "slow":
                    time.sleep(6)
                req = urllib.request.Request(upstream + self.path, data=data, method=method,
                                             headers={"Content-Type": "application/json"})
                try:
                    with urllib.request.urlopen(req, timeout=120) as r:
                        self._send(r.status, r.read())
                except urllib.error.HTTPError as e:
                    self._send(e.code, e.read())

            def do_GET(self) -> None:
                self._forward("GET")

            def do_POST(self) -> None:
                self._forward("POST")

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def test_faults_behind_a_proxy_are_retried_counted_or_clear_errors(tmp_path: Path) -> None:
    """transformers serve behind a fault-injecting proxy: a 500 and a 429 are retried (the answer equals
    the clean one); a body that is not JSON and a request that outlives its timeout are EndpointErrors
    naming the model, never a guessed answer; the store keeps what was answered before."""
    from faithtests.models.errors import EndpointError
    from faithtests.models.openai_api import OpenAIModel, parse_spec
    from faithtests.models.store import OutputStore

    for spec, url, _ in _started("serve", tmp_path):
        proxy = _FaultProxy(url.removesuffix("/v1"))
        model, _ = parse_spec(spec.removeprefix("openai:"))
        api = OpenAIModel(spec=f"openai:{model}@{proxy.url}/v1", model=model, base_url=f"{proxy.url}/v1",
                          max_retries=2, timeout_s=3, concurrency=1)
        api.probe()
        api.use_store(OutputStore(tmp_path / "cache"))
        prompts = _prompts()
        clean = OpenAIModel(spec=spec, model=model, base_url=url, concurrency=1)
        want = clean.generate(prompts[:2], max_new_tokens=6)
        proxy.faults = ["500", "429"]
        before = proxy.seen
        assert api.generate(prompts[:1], max_new_tokens=6) == want[:1]
        assert proxy.seen - before == 3  # two faults retried, then the answer
        proxy.faults = ["garbage"] * 3
        with pytest.raises(EndpointError, match=r"openai:.*@http://127\.0\.0\.1"):
            api.generate(prompts[1:2], max_new_tokens=6)
        proxy.faults = ["slow"] * 3
        with pytest.raises(EndpointError, match="timed out"):
            api.generate(prompts[1:2], max_new_tokens=6)
        assert api.generate(prompts[:1], max_new_tokens=6) == want[:1]  # kept: read back, not asked


def test_the_spd_judge_runs_on_a_served_model(served: str, tmp_path: Path) -> None:
    """``--faith-spd-judge openai:...`` against transformers serve of the reference VLM: the naming test
    runs, DRF is recorded on the slice naming that judge, and what the (tiny, untrained-for-judging)
    judge answered beyond a number is counted as unparseable claims, never guessed."""
    import sys

    cmd = [sys.executable, "-m", "pytest", str(ROOT / "suites" / "test_difference_consistency.py"), "-q",
           "-p", "no:cacheprovider", "-k", "test_difference_naming and base", "--faith-limit", "8",
           "--faith-allow-insufficient", "--faith-vlm", "reference:vlm", "--faith-spd-judge", served,
           "--faith-report", str(tmp_path / "report"), "--faith-no-progress"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
    card = json.loads((tmp_path / "report" / "scorecard.json").read_text())
    drf = [r for r in card["results"] if r["metric"] == "DRF"]
    assert drf and all(f"judge={served}" in r["slice"] for r in drf), done.stdout[-2000:]
    invalid = [i for t in card["tests"] for i in t["invalid"] if "unparseable claim" in i["kind"]]
    # measured: 7 of 7 claims (it answers with words, not a number): counted, and DRF is INSUFFICIENT
    assert invalid and all(served in i["kind"] and i["count"] >= 1 for i in invalid)


def test_without_reply_scores_an_unlisted_letter_is_a_bound_and_the_argmax_stays_exact(vllm: str) -> None:
    """An endpoint that lists 20 alternatives and scores no given reply (a hosted API): vLLM with its
    prompt_logprobs capability switched off. Every letter outside the top 20 gets an upper bound (just
    under the lowest listed log-probability): counted in ``bounded``, never -inf, and the argmax over
    the six options is still the in-process one on every row."""
    import torch

    import faithtests
    from faithtests.protocols.imavb.prompts import a1_text
    from faithtests.protocols.imavb.records import LETTERS
    from faithtests.protocols.imavb.stimuli import premise_item
    from faithtests.world.render import render

    api = faithtests.load_model(vllm)
    api.capabilities["reply_scores"] = "switched off by this test"
    local = faithtests.load_model("reference:vlm")
    prompts = [Prompt(images=(render(it.scene),), text=a1_text(q.question, q.options))
               for it in (premise_item(1, i) for i in range(10)) for q in (it.standard, it.misleading)]
    served, here = api.option_logits(prompts, LETTERS), local.option_logits(prompts, LETTERS)
    assert api.bounded > 0 and bool(torch.isfinite(served).all())
    assert torch.equal(served.argmax(1), here.argmax(1))


def test_a_request_budget_stops_cleanly_and_the_cache_finishes_the_run(served: str, tmp_path: Path) -> None:
    """``--faith-api-max-requests 5`` on AC-Bench's generation tests: the run fails with one line naming
    the budget (no traceback); the same command without the budget and the same ``--faith-cache``
    finishes; a third run with a budget of 1 passes, served entirely from the cache."""
    import sys

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "pytest", str(ROOT / "suites" / "test_affective_conflict.py"), "-q",
               "-p", "no:cacheprovider", "-k", "conflict_shares and generation and base",
               "--faith-limit", "6", "--faith-allow-insufficient", "--faith-vlm", f"api={served}",
               "--faith-cache", str(tmp_path / "cache"), "--faith-no-progress", *extra]
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)

    spent = run("--faith-api-max-requests", "5")
    assert spent.returncode == 1, spent.stdout[-3000:]
    assert "faithtests endpoint error" in spent.stdout and "budget of 5 requests is spent" in spent.stdout
    assert "Traceback" not in spent.stdout
    assert run().returncode in (0, 6)
    cached = run("--faith-api-max-requests", "1")
    assert cached.returncode in (0, 6), cached.stdout[-3000:]


def _estimate_table(out: str) -> dict[str, int]:
    """suite -> requests to send, from the table ``--faith-api-estimate`` prints."""
    rows = re.findall(r"^  (\w+)\s+([\d,]+)\s+([\d,]+)\s+([\d,]+)", out, re.MULTILINE)
    return {suite: int(n.replace(",", "")) for suite, n, _, _ in rows}


def test_the_estimate_counts_what_the_real_run_sends(served: str, tmp_path: Path) -> None:
    """``--faith-api-estimate`` over every suite (``--faith-limit 4``), then the same run for real, both
    through a counting proxy in front of transformers serve: the estimate sends the probe's requests and
    nothing else and writes no report; per suite, the requests it counted are the ones the real run sent
    (its scorecard's ``endpoint.suites``, the probe apart) where the protocol declares no request that
    only the answers decide, and a lower bound where it does (SPD-Faith's naming question: at most one
    more request per pair, a third of its Yes/No and count questions)."""
    import sys

    from faithtests.models.openai_api import parse_spec
    from faithtests.protocols import manifests

    model, url = parse_spec(served.removeprefix("openai:"))
    proxy = _FaultProxy(url.removesuffix("/v1"))

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "pytest", str(ROOT / "suites"), "-q", "-p", "no:cacheprovider",
               "--faith-limit", "4", "--faith-allow-insufficient", "--faith-no-progress",
               "--faith-vlm", f"api=openai:{model}@{proxy.url}/v1", *extra]
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)

    estimate = run("--faith-api-estimate", "--faith-report", str(tmp_path / "estimate"))
    assert estimate.returncode == 0, estimate.stdout[-3000:]
    # the probe: one image with logprobs, one prompt_logprobs request (transformers serve refuses it), one
    # clip with its soundtrack (refused too)
    probe = proxy.completions
    assert probe == 3 and "sent: 3 request(s), the probe at load (nothing after it)" in estimate.stdout
    assert not (tmp_path / "estimate").exists()
    counted = _estimate_table(estimate.stdout)
    real = run("--faith-report", str(tmp_path / "real"))
    assert real.returncode in (0, 6), real.stdout[-3000:]
    endpoint = json.loads((tmp_path / "real" / "scorecard.json").read_text())["fingerprint"]["models"][
        "api"]["endpoint"]
    sent = endpoint["suites"]
    assert proxy.completions - probe == endpoint["requests"] == endpoint["probe"] + sum(sent.values())
    assert set(counted) == {*sent, "total"} and counted["total"] == sum(counted[s] for s in sent)
    bounds = {s for m in manifests() for s in m.suites if m.answer_dependent}
    for suite, n in sent.items():
        if suite in bounds:
            assert counted[suite] <= n <= counted[suite] + counted[suite] // 3, (suite, counted, sent)
        else:
            assert counted[suite] == n, (suite, counted, sent)
    assert "difference_consistency" in bounds and "difference_consistency: a lower bound" in estimate.stdout


def _clip_prompts(n: int) -> list[Prompt]:
    """IMAVB's clips with their soundtracks as the reference omni model gets them (A1 text)."""
    from faithtests.protocols.imavb import audio_stimuli
    from faithtests.protocols.imavb.prompts import Stimulus, a1_text, stimulus_prompt

    recs = audio_stimuli.clip_records(audio_stimuli.clip_items(n, 0))
    return [stimulus_prompt(Stimulus(r.load_media(), r.audio(), r.fps), a1_text(r.question, r.options))
            for r in recs[: 4 * n : 2]]


def test_vllm_serves_the_omni_models_images_audio_and_video_as_in_process(vllm_omni: str) -> None:
    """vLLM's Qwen2.5-Omni with the parts of faithtests.models.api_media: the probe finds video and audio
    taken, and a clip's frames as images, its frames as a video, and its soundtrack alone each give the
    in-process omni model's letter log-probabilities (differences to letter A) within LOGPROB_TOLERANCE.
    A clip *with* its soundtrack interleaved is not held to it: vLLM lays out the interleaved clip's
    M-RoPE positions differently from transformers (0.33 on one clip, measured 2026-12-01; the
    premise suite's verdicts stay equal, benchmarks/results/served_vllm_omni.json), so that is a
    difference serving makes and the side-by-side run reports it."""
    import dataclasses

    import torch

    import faithtests
    from faithtests.protocols.imavb.records import LETTERS

    api = faithtests.load_model(vllm_omni)
    assert api.capabilities["media_parts"] == "yes" and api.accepts_audio
    local = faithtests.load_model("reference:omni")
    clips = _clip_prompts(4)
    forms = {"frames as images": [Prompt(images=c.video, text=c.text) for c in clips],
             "video": [dataclasses.replace(c, audio=None) for c in clips],
             "audio": [dataclasses.replace(c, video=(), video_fps=None) for c in clips]}
    for form, prompts in forms.items():
        served, here = api.option_logits(prompts, LETTERS), local.option_logits(prompts, LETTERS)
        assert torch.equal(served.argmax(1), here.argmax(1)), form
        worst = float(((served - served[:, :1]) - (here - here[:, :1])).abs().max())
        assert worst < LOGPROB_TOLERANCE, (form, worst)
    assert all(api.generate(clips, 4)), "every clip with its soundtrack is answered"
    # a letter scored as a given reply (prompt_logprobs) sees the same clip, soundtrack interleaved, as
    # the listed alternatives do: the two scores of one letter agree
    from faithtests.models.api_replies import top_logprobs

    for clip in clips[:2]:
        listed = top_logprobs(api._complete(clip, 1, logprobs=True))
        token, logprob = listed[0]
        scored = api._reply_logprob(clip, token.strip())
        assert scored is not None and abs(scored - logprob) < LOGPROB_TOLERANCE, (token, scored, logprob)


def test_an_endpoint_without_video_input_makes_clips_not_applicable(served: str) -> None:
    """transformers serve refuses the clip's request fields: found once at load with its words; a clip
    is then not applicable (never sent, never an exception per prompt), and the premise suite sends
    this model a clip's frames as images (accepts_audio is False)."""
    import faithtests

    api = faithtests.load_model(served)
    assert api.capabilities["media_parts"].startswith("the endpoint refused a video with its soundtrack")
    assert "Unexpected fields" in api.capabilities["media_parts"] and not api.accepts_audio
    sent = api.requests
    with pytest.raises(NotApplicable, match="refused a video with its soundtrack"):
        api.generate(_clip_prompts(1))
    assert api.requests == sent
