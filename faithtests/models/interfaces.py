"""The two model protocols every suite talks to (docs/architecture.md, "Two model protocols").

Suites never see a concrete adapter: a dual encoder, an HF generative VLM and a reference model all
satisfy one of these. Tensors come back on the CPU in float32 so metrics never depend on the device.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import torch
    from PIL import Image

#: ``fn(layer, weights, spans) -> weights``: rewrites softmaxed attention weights of one layer,
#: shape [batch, heads, q, k]. Returning the input unchanged must leave the model's outputs unchanged.
AttentionModifier = Callable[[int, "torch.Tensor", "TokenSpans"], "torch.Tensor"]
#: ``fn(logits, letters) -> logits`` on option-letter logits [N, len(letters)] before the decision.
LogitAdjuster = Callable[["torch.Tensor", Sequence[str]], "torch.Tensor"]
#: ``fn(layer, delta_attn, delta_ffn) -> delta_ffn``: rewrites the FFN sub-layer's update of the residual
#: stream in one decoder layer, given the attention sub-layer's update at the same positions (both
#: [batch, seq, hidden]). Returning ``delta_ffn`` unchanged must leave the model's outputs unchanged.
FfnModifier = Callable[[int, "torch.Tensor", "torch.Tensor"], "torch.Tensor"]


#: Where a prompt's ``description`` goes inside its ``text`` (at most once); without it the description
#: is shown first, then a newline, then ``text``.
DESCRIPTION_SLOT = "{description}"


@dataclass(frozen=True, eq=False)
class Audio:
    """A mono waveform: float32 ``samples`` (1-D numpy array, nominally in [-1, 1]) at ``sampling_rate``
    Hz. Adapters pass it to the family's own feature extractor, which must expect this rate (the data
    layer resamples; models never do)."""

    samples: npt.NDArray[np.float32]
    sampling_rate: int

    def __post_init__(self) -> None:
        import numpy as np  # local: interfaces stays import-light for the torch-free plugin

        if not isinstance(self.samples, np.ndarray) or self.samples.ndim != 1 or self.samples.size == 0:
            raise ValueError("Audio.samples must be a non-empty 1-D numpy array (mono)")
        if self.samples.dtype != np.float32:
            raise ValueError(f"Audio.samples must be float32, got {self.samples.dtype}")
        if not np.isfinite(self.samples).all():
            raise ValueError("Audio.samples holds NaN or infinite values")
        if int(self.sampling_rate) <= 0:
            raise ValueError(f"Audio.sampling_rate must be positive, got {self.sampling_rate}")

    def digest(self) -> str:
        """Content digest (rate and sample bytes): equal waveforms give equal digests."""
        import hashlib  # local: only prompts that carry audio are hashed this way

        h = hashlib.sha256(f"{int(self.sampling_rate)}|{self.samples.size}|".encode())
        h.update(self.samples.tobytes())
        return h.hexdigest()


@dataclass(frozen=True)
class Prompt:
    """One multimodal prompt: images, a user text, and optionally a description placed in it.

    ``text`` holds the question with its options already laid out. ``description`` is tracked as its
    own token span (affective-conflict suite): it replaces :data:`DESCRIPTION_SLOT` in ``text`` when
    ``text`` has one (AC-Bench App. C.3 puts it between "IMAGE + DESCRIPTION:" and "Question:"), else
    it is shown before ``text``. ``images`` may hold two images (difference suite). Adapters render it
    through the model's own chat template, which decides where the images go.

    ``video`` and ``audio`` are for omni models (audio + vision): an adapter without an audio input
    refuses a prompt that carries them (never ignores them). Both default to empty, so image prompts,
    their rendering and their cache keys are what they were before audio existed.
    """

    images: tuple[Image.Image, ...]
    text: str
    description: str | None = None
    #: Frames of one video clip (omni models), in time order; () for none.
    video: tuple[Image.Image, ...] = ()
    #: One waveform (omni models); with ``video`` it is the clip's own soundtrack.
    audio: Audio | None = None
    #: Frames per second of ``video`` as sampled (how the model aligns frames with the audio in time).
    video_fps: float | None = None


@dataclass(frozen=True)
class TokenSpans:
    """Half-open token index ranges [start, end) in the rendered prompt, per batch row.

    Indices are positions in the batch tensor the model saw (key positions of the attention weights).
    ``image`` runs from the first to one past the last image token (it may include separator tokens
    between images or tiles); ``image_runs`` lists the contiguous runs of image tokens exactly.
    ``description`` is (0, 0) when the prompt has none. ``length`` is the number of real tokens and
    ``offset`` the position of the first one (non-zero only for left-padded batches, e.g. in generation).
    """

    image: list[tuple[int, int]]
    description: list[tuple[int, int]]
    length: list[int]
    image_runs: list[list[tuple[int, int]]] = field(default_factory=list)
    offset: list[int] = field(default_factory=list)
    #: Omni models: runs of audio tokens per row ([] for a row without audio; the whole list is empty
    #: for models without audio input).
    audio_runs: list[list[tuple[int, int]]] = field(default_factory=list)

    def audio_span(self, row: int) -> tuple[int, int]:
        """[first, last + 1) of ``row``'s audio tokens, (0, 0) without audio."""
        runs = self.audio_runs[row] if self.audio_runs else []
        return (runs[0][0], runs[-1][1]) if runs else (0, 0)

    def other_mask(self, row: int, width: int) -> list[bool]:
        """True at the real positions of ``row`` that are neither image (or video), audio nor description
        tokens."""
        start = self.offset[row] if self.offset else 0
        keep = [start <= i < start + self.length[row] for i in range(width)]
        audio = self.audio_runs[row] if self.audio_runs else []
        for a, b in [*(self.image_runs[row] if self.image_runs else [self.image[row]]), *audio]:
            for i in range(a, min(b, width)):
                keep[i] = False
        a, b = self.description[row]
        for i in range(a, min(b, width)):
            keep[i] = False
        return keep


@dataclass(frozen=True)
class Attentions:
    """Attention of the answer query (last prompt position): ``weights[layer]`` is [N, heads, keys]."""

    weights: list[torch.Tensor]
    spans: TokenSpans


@dataclass(frozen=True)
class Contrast:
    """Contrastive greedy decoding against one auxiliary prompt per row of a ``generate`` call (SPD-Faith
    Eq. 7 / 24): each step's logits are L_main + eta * ReLU(L_main - L_aux), where L_aux continues
    ``aux[i]`` with the tokens chosen so far. ``tag`` names how ``aux`` was built (output-cache key)."""

    aux: tuple[Prompt, ...]
    eta: float
    tag: str


@dataclass
class Hooks:
    """Inference-time interventions, applied by an adapter for the duration of a call.

    ``attention`` modifiers see every query row of the call ([batch, heads, q, k], keys at absolute
    positions, spans of the call's batch) in every method, generation included; ``mlp_scale`` multiplies
    the FFN's residual contribution; ``logit_adjuster`` applies to option logits (``option_logits`` /
    ``decide``), not to free generation.

    ``ffn`` modifiers rewrite the FFN update given the attention update (every method); ``contrast``
    applies to ``generate`` only (other methods refuse it: combine their logits in the protocol).

    ``tag`` names the attention / FFN modifiers and their parameters (e.g. ``"cecs(alpha=0.5)"``): the
    persistent output cache keys on it, and never stores a call whose modifiers carry no tag."""

    attention: dict[int, AttentionModifier] = field(default_factory=dict)  # layer -> modifier
    mlp_scale: dict[int, float] = field(default_factory=dict)  # layer -> factor on the MLP output
    logit_adjuster: LogitAdjuster | None = None
    tag: str | None = None
    ffn: dict[int, FfnModifier] = field(default_factory=dict)  # layer -> FFN-update modifier
    contrast: Contrast | None = None


@runtime_checkable
class ImageTextScorer(Protocol):
    """s(image, text): cosine of L2-normalised embeddings for dual encoders (LGIP §3)."""

    spec: str

    def encode_images(self, images: Sequence[Image.Image]) -> torch.Tensor: ...

    def encode_texts(self, texts: Sequence[str]) -> torch.Tensor: ...

    def similarity(self, images: Sequence[Image.Image], texts: Sequence[str]) -> torch.Tensor:
        """Pairwise: ``similarity(images, texts)[i] = s(images[i], texts[i])``."""
        ...

    def fingerprint(self) -> dict[str, Any]:
        """Spec, checkpoint hash, dtype, device: goes into the scorecard's fingerprint."""
        ...


@dataclass(frozen=True)
class Decision:
    """One forward pass's answer-position outputs: option logits [N, K] and pre-answer states [L, N, D]."""

    logits: torch.Tensor
    states: torch.Tensor


@runtime_checkable
class VisionLanguageModel(Protocol):
    spec: str
    num_layers: int

    def option_logits(
        self, prompts: Sequence[Prompt], options: Sequence[str], hooks: Hooks | None = None
    ) -> torch.Tensor:
        """Next-token logits of the option letters ("A", "B") at the answer position, [N, len(options)]."""
        ...

    def states(self, prompts: Sequence[Prompt], hooks: Hooks | None = None) -> torch.Tensor:
        """Pre-answer hidden state of every decoder layer at the last prompt position, [layers, N, D].

        Entry ``l`` is the output of decoder layer ``l`` (0-based): the embedding output is not included
        and the last entry is taken before the model's final norm (the raw residual stream)."""
        ...

    def decide(
        self, prompts: Sequence[Prompt], options: Sequence[str], hooks: Hooks | None = None
    ) -> Decision:
        """``option_logits`` and ``states`` from the same forward pass (probes read both per prompt)."""
        ...

    def answer_logprob(
        self, prompts: Sequence[Prompt], answers: Sequence[str], hooks: Hooks | None = None
    ) -> torch.Tensor:
        """Log-probability of each full answer as the assistant's reply to each prompt, [N, len(answers)]:
        the sum over the answer's own tokens (multi-token labels such as "contentment" score whole)."""
        ...

    def attentions(self, prompts: Sequence[Prompt], hooks: Hooks | None = None) -> Attentions: ...

    def generate(
        self, prompts: Sequence[Prompt], max_new_tokens: int = 32, hooks: Hooks | None = None
    ) -> list[str]:
        """Greedy decoding; no sampling."""
        ...

    def fingerprint(self) -> dict[str, Any]: ...
