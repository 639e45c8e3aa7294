"""``openai:MODEL@BASE_URL`` without a server: a malformed spec and an endpoint that is not there are
clear errors at load (the served tests, with real servers, are in tests/served)."""

from __future__ import annotations

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
