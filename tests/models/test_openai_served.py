"""``openai:`` against a real ``transformers serve`` of the reference VLM (issue 45), never a mock.

The server runs from its own small venv (``$FAITH_SERVE_VENV``, default ``.venv-serve`` in the checkout:
CPU torch + ``transformers[serving]``), started here by PID on a free loopback port and stopped by that
PID. Without that venv the tests skip with the reason (under ``CI=true`` they fail).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("openai")

from faithtests.models.errors import ModelSpecError, NotApplicable
from faithtests.models.interfaces import Prompt
from faithtests.models.locations import fixtures_root

ROOT = Path(__file__).resolve().parents[2]
SERVE_VENV = Path(os.environ.get("FAITH_SERVE_VENV", ROOT / ".venv-serve"))
READY_S = 180


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    exe = SERVE_VENV / "bin" / "transformers"
    if not exe.is_file():
        why = f"no transformers serve venv at {SERVE_VENV} (docs/models.md, serving a checkpoint)"
        if os.environ.get("CI", "").strip().lower() in ("true", "1", "yes"):
            pytest.fail(f"CI=true and {why}")
        pytest.skip(why)
    port = _free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([str(exe), "serve", str(fixtures_root() / "vlm"), "--host", "127.0.0.1",
                             "--port", str(port)], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + READY_S
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                err = proc.stderr.read() if proc.poll() is not None and proc.stderr else ""
                pytest.fail(f"transformers serve did not come up on {url} in {READY_S} s: {err[-2000:]}")
            time.sleep(1)
        yield f"{url}/v1"
    finally:
        proc.terminate()  # by PID, never by name
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


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

    api = faithtests.load_model(f"openai:{fixtures_root() / 'vlm'}@{served}")
    local = faithtests.load_model("reference:vlm")
    prompts = _prompts()
    assert api.generate(prompts, max_new_tokens=12) == local.generate(prompts, max_new_tokens=12)


def test_what_the_endpoint_lacks_is_not_applicable_with_the_reason(served: str) -> None:
    import faithtests

    api = faithtests.load_model(f"openai:{fixtures_root() / 'vlm'}@{served}")
    # transformers serve accepts logprobs=True and returns none (issue 45): found once, at load
    assert "returned no top_logprobs" in api.capabilities["logprobs"]
    with pytest.raises(NotApplicable, match="returned no top_logprobs"):
        api.option_logits(_prompts()[:1], ["A", "B"])
    for call in (lambda: api.states(_prompts()[:1]), lambda: api.decide(_prompts()[:1], ["A", "B"]),
                 lambda: api.attentions(_prompts()[:1])):
        with pytest.raises(NotApplicable, match="served model shows no"):
            call()


def test_the_key_is_never_in_the_fingerprint(served: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import faithtests

    monkeypatch.setenv("FAITH_API_KEY", "sk-secret-do-not-write")
    api = faithtests.load_model(f"openai:{fixtures_root() / 'vlm'}@{served}")
    assert "sk-secret" not in json.dumps(api.fingerprint())
    assert api.fingerprint()["served"]["model"]


def test_bad_specs_and_dead_endpoints_are_clear_errors() -> None:
    import faithtests

    with pytest.raises(ModelSpecError, match="expected openai:MODEL@BASE_URL"):
        faithtests.load_model("openai:no-url-here")
    dead = f"http://127.0.0.1:{_free_port()}/v1"
    with pytest.raises(ModelSpecError, match="refused a one-image probe request"):
        faithtests.load_model(f"openai:m@{dead}")
