"""Library log messages that are only noise in a faithtests run, dropped where they are logged.

A suite drives a model through the adapters, so a library's advice to the caller (transformers'
deprecation of ``past_key_values`` for the adapter's own cache argument, generation flags a checkpoint's
``generation_config.json`` sets but greedy decoding ignores) says nothing the user can act on, yet it is
printed beside every failure. Each entry names the logger and the message's start exactly; every other
message of these loggers, and every other logger, is untouched (a weight that failed to load still
warns). No library is imported here: ``logging.getLogger`` returns the logger the library uses.
"""

from __future__ import annotations

import logging

#: logger name -> starts of the messages dropped from it
NOISE: dict[str, tuple[str, ...]] = {
    "transformers.utils.generic": ("`past_key_values`/`cache_params` are deprecated",),
    "transformers.generation.configuration_utils": ("The following generation flags are not valid",),
}


class DropNoise(logging.Filter):
    """Drops the records whose message starts with one of ``starts``."""

    def __init__(self, starts: tuple[str, ...]) -> None:
        super().__init__()
        self.starts = starts

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.starts)


def quiet_library_noise() -> None:
    """Add the :data:`NOISE` filters (once per logger)."""
    for name, starts in NOISE.items():
        logger = logging.getLogger(name)
        if not any(isinstance(f, DropNoise) for f in logger.filters):
            logger.addFilter(DropNoise(starts))
