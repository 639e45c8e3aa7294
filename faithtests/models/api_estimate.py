"""``--faith-api-estimate`` in the models layer: what a served model (``openai:``) would send, counted
instead of sent.

While the switch is on (:func:`estimate_endpoints`, set by the plugin for the whole test process), every
endpoint loaded by :func:`faithtests.models.openai_api.load` probes as usual (those two or three small
requests are real: what they find decides which requests the suites make), then sends nothing more: each
call counts its rows in a :class:`Tally` and returns placeholders
(:meth:`~faithtests.models.openai_api.OpenAIModel.estimate_rows`). The endpoints of the process are kept
here (:func:`estimating_models`) so the plugin can read their tallies after each test, the SPD judge's
endpoint included (it is loaded by its protocol, not by a model fixture).

Torch-free: the plugin imports this module at load.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

#: The fields of a :class:`Tally`, in the order the summary prints them.
TALLY_FIELDS = ("requests", "cached", "images", "more", "sent")


@dataclass
class Tally:
    """What one endpoint was asked while estimating.

    ``requests``: prompts the run would send (each once: a prompt asked again is answered from the run's
    output store, as in the real run); ``cached``: prompts the output cache (``--faith-cache``) already
    holds, so the real run would not send them; ``images``: the images in the ``requests``; ``more``: at
    most this many further requests, which only the answers decide (an option letter outside the top 20
    log-probabilities is scored by one more request on an endpoint that scores given replies);
    ``sent``: requests really sent (the probe at load).
    """

    requests: int = 0
    cached: int = 0
    images: int = 0
    more: int = 0
    sent: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)

    def minus(self, other: Tally) -> Tally:
        return Tally(**{f.name: getattr(self, f.name) - getattr(other, f.name) for f in fields(self)})

    def plus(self, other: Tally) -> Tally:
        return Tally(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def __bool__(self) -> bool:
        return any(getattr(self, f.name) for f in fields(self))


_SWITCH = {"on": False}
_MODELS: list[Any] = []  # the endpoints loaded while the switch was on, in load order


def estimate_endpoints(on: bool) -> None:
    """Switch estimate mode on for every endpoint loaded from now on in this process (off: and forget
    the endpoints loaded so far)."""
    _SWITCH["on"] = on
    if not on:
        _MODELS.clear()


def estimating() -> bool:
    return _SWITCH["on"]


def add_model(model: Any) -> None:
    """An endpoint that entered estimate mode (after its probe)."""
    _MODELS.append(model)


def estimating_models() -> list[Any]:
    """The endpoints in estimate mode in this process (each has ``spec`` and ``tally()``)."""
    return list(_MODELS)
