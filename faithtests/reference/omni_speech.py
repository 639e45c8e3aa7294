"""The reference omni model learns the world's speech (recipe stage 9, ``speech_audio``; stage 10 is a
premise stage on clips with speech premises, :data:`.train_omni.RESUMABLE_STAGES`).

The model was first trained on clips without speech (stages 1-8). This stage

1. grows the vocabulary by the speech premises' words (:data:`faithtests.world.speech.PREMISE_WORDS`),
   appended after every id the model has, so every text it read before tokenizes as before;
2. warms the audio tower up again on tracks that may speak, with every earlier head and the speech heads
   (:data:`.omni_audio.SPEECH_HEADS`), at a lower rate than the first warm-up so that the sound
   features the decoder already reads move little;
3. starts each new word's embedding at its audio tokens' direction (:func:`.omni_audio.align_audio_words`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from faithtests.reference.omni_audio import align_audio_words, warm_up_audio
from faithtests.reference.omni_init import fast_tokenizer
from faithtests.world.speech import PREMISE_WORDS


def extend_vocabulary(thinker: Any, processor: Any, words: Sequence[str]) -> list[str]:
    """Append ``words`` the tokenizer lacks to its word-level vocabulary (ids after every existing id,
    media tokens included) and grow the thinker's tied embeddings to match; returns the words added."""
    spec = json.loads(processor.tokenizer.backend_tokenizer.to_str())
    vocab: dict[str, int] = spec["model"]["vocab"]
    added = {a["content"]: int(a["id"]) for a in spec["added_tokens"]}
    # the media tokens enter the word vocabulary with their ids first (as omni_init.omni_tokenizer does):
    # else transformers renumbers them from the vocabulary's size, onto the new words' ids
    vocab.update({t: i for t, i in added.items() if i >= len(vocab)})
    next_id = 1 + max([*vocab.values(), *added.values()])
    new = [w for w in words if w not in vocab and w not in added]
    for word in new:
        vocab[word] = next_id
        next_id += 1
    template = getattr(processor.tokenizer, "chat_template", None)
    processor.tokenizer = fast_tokenizer(Tokenizer.from_str(json.dumps(spec)))
    if template is not None:
        processor.tokenizer.chat_template = template
    thinker.resize_token_embeddings(next_id)
    return new


def learn_speech_sounds(thinker: Any, processor: Any, seed: int, steps: int, lr: float,
                        log: Callable[[str], None]) -> dict[str, Any]:
    """Steps 1-3 of the module doc on ``thinker`` / ``processor`` in place; returns the stage's record."""
    new = extend_vocabulary(thinker, processor, PREMISE_WORDS)
    log(f"vocabulary: {new} appended (now {len(processor.tokenizer)} tokens)")
    record = warm_up_audio(thinker, processor, np.random.default_rng([seed, 11]), steps, lr=lr, log=log,
                           speech=True)
    aligned = align_audio_words(thinker, processor, np.random.default_rng([seed, 12]), words=PREMISE_WORDS,
                                speech=True)
    log(f"speech words aligned with their audio tokens: {aligned}")
    return {"words_added": new, "words_aligned": aligned, "audio_warmup": record}
