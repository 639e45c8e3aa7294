"""``openai:MODEL@BASE_URL`` without a server: a malformed spec and an endpoint that is not there are
clear errors at load (the served tests, with real servers, are in tests/served)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai")

from faithtests.models.errors import ModelSpecError
from faithtests.testing import servers


def test_bad_specs_and_dead_endpoints_are_clear_errors() -> None:
    import faithtests

    with pytest.raises(ModelSpecError, match="expected openai:MODEL@BASE_URL"):
        faithtests.load_model("openai:no-url-here")
    dead = f"http://127.0.0.1:{servers.free_port()}/v1"
    with pytest.raises(ModelSpecError, match="refused a one-image probe request"):
        faithtests.load_model(f"openai:m@{dead}")


def test_answers_go_through_the_store_in_chunks_with_one_progress_stage(tmp_path: Path) -> None:
    """The adapter's row path without a server (``call`` stands in for one request): answers in prompt
    order, written to the store chunk by chunk (a second pass asks nothing), and one progress stage over
    all prompts that ends at its total."""
    from faithtests.models.interfaces import Prompt
    from faithtests.models.openai_api import CACHE_CHUNK, OpenAIModel
    from faithtests.models.store import TEXT_CODEC, OutputStore
    from faithtests.progress import ProgressEvent, set_sink

    api = OpenAIModel(spec="openai:m@http://127.0.0.1:9/v1", model="m", base_url="http://127.0.0.1:9/v1",
                      concurrency=3)
    api.served = {"model": "m", "system_fingerprint": "fp", "version": "1"}
    api.use_store(OutputStore(tmp_path / "cache"))
    prompts = [Prompt(images=(), text=f"q{i}") for i in range(CACHE_CHUNK * 2 + 5)]
    asked: list[str] = []

    def call(p: Prompt) -> str:
        asked.append(p.text)
        return p.text.upper()

    events: list[ProgressEvent] = []
    previous = set_sink(events.append)
    try:
        got = api._rows("generate/4", prompts, call, TEXT_CODEC, "")
    finally:
        set_sink(previous)
    assert got == [p.text.upper() for p in prompts] and sorted(asked) == sorted(p.text for p in prompts)
    assert {e.stage for e in events} == {"endpoint generate/4"} and len({e.id for e in events}) == 1
    assert events[-1].finished and events[-1].done == events[-1].total == len(prompts)
    asked.clear()
    assert api._rows("generate/4", prompts, call, TEXT_CODEC, "") == got and asked == []


def _estimating(store: object = None, **capabilities: str) -> object:
    """An endpoint in estimate mode, built without a network (the probe's findings set by hand; its URL is
    a closed port, so a request that slipped through would fail)."""
    from faithtests.models.openai_api import OpenAIModel

    api = OpenAIModel(spec="openai:m@http://127.0.0.1:9/v1", model="m", base_url="http://127.0.0.1:9/v1",
                      max_retries=0, timeout_s=2)
    api.served = {"model": "m", "system_fingerprint": "fp", "version": "1"}
    api.capabilities.update({"images": "yes", **capabilities})
    api.requests = api.probe_requests = 2  # what the probe at load sent
    if store is not None:
        api.use_store(store)  # type: ignore[arg-type]
    api.estimating = True  # what start_estimate sets (it also lists the model for the plugin)
    return api


def test_estimate_mode_counts_prompts_images_and_repeats_and_sends_nothing(tmp_path: Path) -> None:
    """generate in estimate mode: each prompt once (a repeat, in the call or a later one, is answered from
    the run's store in the real run: not counted again), its images counted, "" returned, no request."""
    from PIL import Image

    from faithtests.models.errors import EndpointError
    from faithtests.models.interfaces import Prompt
    from faithtests.models.store import OutputStore

    img = Image.new("RGB", (8, 8), "red")
    api: Any = _estimating(OutputStore(None))
    prompts = [Prompt(images=(img, img), text="two"), Prompt(images=(img,), text="one"),
               Prompt(images=(), text="none"), Prompt(images=(img,), text="one")]
    assert api.generate(prompts, max_new_tokens=8) == ["", "", "", ""]
    assert api.generate(prompts[:2], max_new_tokens=8) == ["", ""]  # asked again: no new request
    api.generate(prompts[:1], max_new_tokens=4)  # another kind of request (its own answer length): one
    t = api.tally()
    assert (t.requests, t.cached, t.images, t.more, t.sent) == (4, 0, 5, 0, 2)
    assert api.requests == 2
    with pytest.raises(EndpointError, match="sends nothing past the probe"):  # the last guard
        api._create(messages=[], max_tokens=1)


def test_estimate_mode_reads_what_the_cache_holds_and_never_stores_a_placeholder(tmp_path: Path) -> None:
    """Rows the output cache holds are read back (real answers) and counted ``cached``; the placeholders
    of the others are never written, so the real run after the estimate asks for them."""
    from faithtests.models.interfaces import Prompt
    from faithtests.models.store import TEXT_CODEC, OutputStore

    store = OutputStore(tmp_path / "cache")
    prompts = [Prompt(images=(), text=f"q{i}") for i in range(5)]
    real: Any = _estimating(store)
    real.estimating = False
    real._rows("generate/8", prompts[:2], lambda p: p.text.upper(), TEXT_CODEC, "")  # an earlier real run
    rows = len(store)
    api: Any = _estimating(store)
    assert api.generate(prompts, max_new_tokens=8) == ["Q0", "Q1", "", "", ""]
    t = api.tally()
    assert (t.requests, t.cached) == (3, 2) and len(store) == rows
    asked: list[str] = []
    real._rows("generate/8", prompts, lambda p: asked.append(p.text) or p.text, TEXT_CODEC, "")
    assert sorted(asked) == ["q2", "q3", "q4"]  # the real run sends exactly what the estimate counted


def test_estimate_mode_option_logits_are_zero_rows_with_the_bound_of_scored_replies() -> None:
    """option_logits: a zero row per prompt; where the endpoint scores given replies (vLLM), each option
    letter may cost one more request (outside the top 20): counted in ``more``, an upper bound; where it
    scores none, nothing more. Without a store every prompt counts (the real run asks each)."""
    import torch

    from faithtests.models.interfaces import Prompt

    prompts = [Prompt(images=(), text="a"), Prompt(images=(), text="a"), Prompt(images=(), text="b")]
    scored: Any = _estimating(None, logprobs="yes", reply_scores="yes")
    assert torch.equal(scored.option_logits(prompts, ["A", "B", "C"]), torch.zeros(3, 3))
    assert (scored.tally().requests, scored.tally().more) == (3, 9)
    bounded: Any = _estimating(None, logprobs="yes", reply_scores="the endpoint refused prompt_logprobs")
    bounded.option_logits(prompts, ["A", "B"])
    assert (bounded.tally().requests, bounded.tally().more) == (3, 0)


def test_estimate_mode_keeps_what_is_not_applicable_not_applicable() -> None:
    """A call the real run could not make is not applicable in the estimate too: a prompt with audio on an
    endpoint that refused the probe's clip, and option logits on an endpoint that returned no
    log-probabilities (transformers serve)."""
    import numpy as np

    from faithtests.models.errors import NotApplicable
    from faithtests.models.interfaces import Audio, Prompt

    api: Any = _estimating(None, logprobs="the endpoint accepted logprobs=True but returned no top_logprobs",
                           media_parts="the endpoint refused a video with its soundtrack: 422")
    with pytest.raises(NotApplicable, match="returned no top_logprobs"):
        api.option_logits([Prompt(images=(), text="a")], ["A", "B"])
    heard = Prompt(images=(), text="a", audio=Audio(np.zeros(160, dtype=np.float32), 16000))
    with pytest.raises(NotApplicable, match="refused a video with its soundtrack: 422"):
        api.generate([heard])
    assert api.tally().requests == 0
