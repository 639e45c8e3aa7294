"""Errors of model loading: each names the spec and what was looked for."""

from __future__ import annotations


class ModelNotFoundError(FileNotFoundError):
    """The spec is well formed but its checkpoint/config is not where it was looked for (or not cached
    locally while downloads are off)."""


class ModelSpecError(ValueError):
    """The spec string itself is malformed or names an unknown adapter."""


class UnsupportedModelError(ValueError):
    """A checkpoint was found but its architecture is neither a dual encoder nor an image-text-to-text VLM."""


class CheckpointError(ValueError):
    """A checkpoint was found but cannot be used as it is: a truncated or corrupt file, an unreadable config,
    weights that do not fit the configured architecture, or a resize the user did not ask for."""


class PluginContractError(TypeError):
    """A plug-in model (``py:`` or entry point) or a user's judge returned something its protocol does not
    allow (a list for a tensor, a wrong shape, None for text, a non-finite count); names the plug-in."""
