"""Audio warm-up for the reference omni model: its audio tower learns the world's sounds from their
exact ground truth before the decoder ever reads it.

Every audio token (25 per second: 40 ms) is labelled from the soundtrack
(:meth:`faithtests.world.sound.Soundtrack.frame_labels`): which event sound is active, how loud, the
ambient bed, the music and its current note, plus how many events have started so far (counting and
time order are then a read-out of the tokens). Linear heads on the tower's output read the labels
(cross-entropy); they are dropped afterwards. With ``speech`` (the recipe's speech stage) half the
tracks of at most three events also speak a word, and three more heads read what is said, by whom and how
(:data:`SPEECH_HEADS`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from faithtests.world import sound, speech

#: Seconds per audio token of the thinker (a Whisper-style tower pooled to 25 tokens per second).
TOKEN_S = 0.04
MAX_EVENTS = 4
#: Head -> number of classes (``started``: events begun so far, 0..MAX_EVENTS).
HEADS: dict[str, int] = {"sound": 1 + len(sound.SOUND_TYPES), "loudness": 1 + len(sound.LOUDNESS),
                         "ambient": len(sound.AMBIENTS), "music": len(sound.MUSIC),
                         "note": 1 + len(sound.MELODY_HZ), "started": 1 + MAX_EVENTS}
SPEECH_HEADS: dict[str, int] = {"word": 1 + len(speech.WORDS), "speaker": 1 + len(speech.SPEAKERS),
                                "tone": 1 + len(speech.TONES)}
#: Share of the speech stage's tracks (of <= 3 events: a word needs the room of one more) that speak.
SPEECH_SHARE = 0.5


def random_track(rng: np.random.Generator, speech: bool = False) -> sound.Soundtrack:
    """A soundtrack of 0..MAX_EVENTS events of random sound and loudness, random ambient and music; with
    ``speech``, a word too in :data:`SPEECH_SHARE` of those with room (without, the draws are the audio
    stage's as first trained)."""
    n = int(rng.integers(0, MAX_EVENTS + 1))
    specs = [(str(rng.choice(sound.SOUND_TYPES)), str(rng.choice(sound.LOUDNESS))) for _ in range(n)]
    if speech and n < MAX_EVENTS and rng.random() < SPEECH_SHARE:
        return sound.sample_soundtrack(rng, specs, said=sound.sample_said(rng))
    return sound.sample_soundtrack(rng, specs)


def token_labels(track: sound.Soundtrack) -> dict[str, np.ndarray]:
    """Per audio token labels of ``track`` (``HEADS``' keys)."""
    labels = dict(track.frame_labels(TOKEN_S))
    centres = (np.arange(labels["sound"].size) + 0.5) * TOKEN_S
    labels["started"] = np.array([sum(e.start <= c for e in track.events) for c in centres], np.int64)
    return labels


def audio_tokens(thinker: Any, processor: Any, waves: Sequence[np.ndarray]) -> torch.Tensor:
    """The thinker's audio tokens for 2 s waveforms: [len(waves), 50, width]. Features are extracted at
    the clip's own length (the processor pads to 30 s; the valid frames are the same but the last)."""
    fe = processor.feature_extractor
    enc = fe(list(waves), sampling_rate=fe.sampling_rate, padding="max_length", max_length=sound.N_SAMPLES,
             return_attention_mask=True, return_tensors="pt")
    mask = enc["attention_mask"]
    hidden: torch.Tensor = thinker.model.get_audio_features(enc["input_features"],
                                                            feature_attention_mask=mask).last_hidden_state
    return hidden.reshape(len(waves), -1, hidden.shape[-1])


def warm_up_audio(thinker: Any, processor: Any, rng: np.random.Generator, steps: int, batch: int = 16,
                  lr: float = 2e-3, log: Callable[[str], None] = print,
                  speech: bool = False) -> dict[str, Any]:
    """Train ``thinker.model.audio_tower`` alone on the dense labels (with ``speech``, tracks that speak
    and the speech heads too); returns the record (per-head token accuracy over the last 50 steps,
    seconds)."""
    tower = thinker.model.audio_tower
    tower.train()
    width = int(thinker.config.audio_config.output_dim)
    names = {**HEADS, **(SPEECH_HEADS if speech else {})}
    heads = nn.ModuleDict({k: nn.Linear(width, n) for k, n in names.items()})
    params = [*tower.parameters(), *heads.parameters()]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps, pct_start=0.1)
    t0 = time.time()
    acc: dict[str, list[float]] = {k: [] for k in names}
    for step in range(steps):
        tracks = [random_track(rng, speech) for _ in range(batch)]
        feats = audio_tokens(thinker, processor, [sound.synthesise(t) for t in tracks])
        labels = [token_labels(t) for t in tracks]
        loss: Any = torch.zeros(())
        for k, head in heads.items():
            y = torch.from_numpy(np.stack([lab[k] for lab in labels]))
            logits = head(feats)
            loss = loss + nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            acc[k].append(float((logits.argmax(-1) == y).float().mean()))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        if step % 50 == 0 or step == steps - 1:
            accs = " ".join(f"{k} {np.mean(v[-50:]):.2f}" for k, v in acc.items())
            log(f"audio {step}/{steps} loss {float(loss.detach()):.3f} {accs} {time.time() - t0:.0f}s")
    tower.eval()
    return {"steps": steps, "batch": batch, "lr": lr, "seconds": round(time.time() - t0, 1),
            "token_accuracy": {k: round(float(np.mean(v[-50:])), 3) for k, v in acc.items()}}


#: Word -> (label, class) whose audio tokens the word's embedding starts from (:func:`align_audio_words`).
WORD_UNITS: dict[str, tuple[str, int]] = {
    **{s: ("sound", 1 + i) for i, s in enumerate(sound.SOUND_TYPES)},
    **{s: ("loudness", 1 + i) for i, s in enumerate(sound.LOUDNESS)},
    **{s: ("ambient", i) for i, s in enumerate(sound.AMBIENTS) if s != "none"},
    **{s: ("music", i) for i, s in enumerate(sound.MUSIC) if s != "none"},
    **{s: ("speaker", 1 + i) for i, s in enumerate(speech.SPEAKERS)},
    **{s: ("tone", 1 + i) for i, s in enumerate(speech.TONES)},
}
#: Labels read among the tokens where something is on (an event, a word), not among all tokens.
_AMONG_ACTIVE = ("sound", "loudness", "speaker", "tone")


@torch.no_grad()
def align_audio_words(thinker: Any, processor: Any, rng: np.random.Generator, n: int = 64,
                      words: Sequence[str] | None = None, speech: bool = False) -> list[str]:
    """Start each sound word's embedding (``WORD_UNITS``, or those of ``words``) at the mean row norm along
    the direction its audio tokens take from the mean audio token (of the event or speech tokens, for
    event and speech words), as the VLM's attribute words started at their image patches' unit: a
    question's "knock" and the tokens of a knock are similar from the first step. ``speech``: drawn from
    tracks that may speak. Returns the words set (a word not in the vocabulary or never heard is left)."""
    tracks = [random_track(rng, speech) for _ in range(n)]
    feats = audio_tokens(thinker, processor, [sound.synthesise(t) for t in tracks])
    feats = feats.reshape(-1, feats.shape[-1])
    labels = [token_labels(t) for t in tracks]
    emb = thinker.model.language_model.embed_tokens.weight
    norm = emb.norm(dim=-1).mean()
    done = []
    for word, (key, cls) in WORD_UNITS.items():
        if words is not None and word not in words:
            continue
        token = int(processor.tokenizer.convert_tokens_to_ids(word))
        values = np.concatenate([lab[key] for lab in labels])
        mask = torch.from_numpy(values == cls)
        if token == processor.tokenizer.unk_token_id or not bool(mask.any()):
            continue
        # event words are told apart among event tokens (else all share the "something sounds" direction)
        pool = torch.from_numpy(values != 0) if key in _AMONG_ACTIVE else torch.ones_like(mask)
        direction = feats[mask].mean(0) - feats[pool].mean(0)
        emb[token] = norm * direction / direction.norm()
        done.append(word)
    return done
