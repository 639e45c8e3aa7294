"""``openai:MODEL@BASE_URL`` without a server: a malformed spec and an endpoint that is not there are
clear errors at load (the served tests, with real servers, are in tests/served)."""

from __future__ import annotations

from pathlib import Path

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
        got = api._rows("generate/4", prompts, call, TEXT_CODEC)
    finally:
        set_sink(previous)
    assert got == [p.text.upper() for p in prompts] and sorted(asked) == sorted(p.text for p in prompts)
    assert {e.stage for e in events} == {"endpoint generate/4"} and len({e.id for e in events}) == 1
    assert events[-1].finished and events[-1].done == events[-1].total == len(prompts)
    asked.clear()
    assert api._rows("generate/4", prompts, call, TEXT_CODEC) == got and asked == []
