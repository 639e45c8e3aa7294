"""What an OpenAI-compatible endpoint says, read once (:mod:`.openai_api`): the first token's listed
alternatives, the server's version, and a failed call's own words."""

from __future__ import annotations

from typing import Any

from faithtests.models.errors import EndpointError


def top_logprobs(response: Any) -> list[tuple[str, float]]:
    """(token, logprob) of the first generated token's alternatives; [] when the endpoint gave none."""
    try:
        content = response.choices[0].logprobs.content
        first = content[0]
    except (AttributeError, IndexError, TypeError):
        return []
    alts = list(first.top_logprobs or [])
    return [(str(a.token), float(a.logprob)) for a in alts] or [(str(first.token), float(first.logprob))]


def server_version(base_url: str) -> str:
    """``GET <root>/version`` (vLLM answers ``{"version": ...}``), "" where the server has none."""
    import json  # local: only at load
    import urllib.request  # local: only at load

    root = base_url.removesuffix("/v1")
    try:
        with urllib.request.urlopen(f"{root}/version", timeout=5) as r:
            return str(json.loads(r.read()).get("version", ""))
    except (OSError, ValueError, AttributeError):  # no such route (transformers serve, hosted APIs)
        return ""


def server_says(err: BaseException) -> str:
    """The error with what the server said (its JSON body's ``detail`` / ``message``), not just a code."""
    if isinstance(err, EndpointError) and err.__cause__ is not None:  # the server's words, once
        err = err.__cause__
    body = getattr(err, "body", None)
    if isinstance(body, dict):
        said = body.get("detail") or body.get("message") or body.get("error") or body
        return f"{err}: {said}" if str(said) not in str(err) else str(err)
    return str(err)
