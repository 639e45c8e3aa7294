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


class EndpointError(RuntimeError):
    """A served model (``openai:``) stopped answering mid-run: the server died, refused the request
    (after the client's retries on 429 / 5xx), timed out or sent what is not a chat completion. Names the
    model and what the server said; rows answered before it are kept in the output cache."""


#: feature -> what it is (a :class:`NotApplicable` reason names it; :mod:`.capabilities` finds them)
FEATURES: dict[str, str] = {
    "chat_template": "a chat template (every prompt is laid out through it)",
    "attention": "softmax attention weights over the prompt in every decoder layer (captures, modifiers, "
                 "the step reading of contrastive decoding)",
    "residual_hooks": "an ungated attention and FFN update per decoder layer (MLP scales, FFN modifiers)",
    "patch_grid": "one square patch grid of image tokens per image",
    "logits_processors": "a generate() that applies the caller's logits processors (contrastive decoding)",
    "caption_scores": "caption log-likelihoods per token (a generative VLM used as an image-text scorer)",
    "hidden_states": "hidden states of every decoder layer (probes, lenses, pre-answer states)",
    "hooks": "inference-time interventions inside the model (attention, FFN, logit adjusters)",
    "logprobs": "log-probabilities of the first answer token's alternatives (option logits)",
    "answer_scores": "the log-probability of a given answer (not one the model generated)",
    "media_parts": "video and audio parts in a request (a clip with its soundtrack)",
}


class NotApplicable(Exception):
    """A call needs ``feature``, which model ``spec`` lacks (``reason``, found once at load): the plugin
    reports the test as not applicable with this message. Torch-free, so the plugin can catch it."""

    def __init__(self, spec: str, feature: str, reason: str) -> None:
        self.spec, self.feature, self.reason = spec, feature, reason
        super().__init__(f"not applicable: {spec} lacks {FEATURES.get(feature, feature)}: {reason}")
