"""Word-level tokenizers over the world's vocabulary, saved as Hugging Face ``PreTrainedTokenizerFast``.

The vocabulary is every word (``\\w+`` run or punctuation run, the ``Whitespace`` pre-tokenizer's
split) that the world's captions, templates, prompts, options, descriptions and claims can produce,
collected from the word lists plus a fixed sample of generated items, so it is the same on every
machine. Anything else maps to ``[UNK]``: a user prompt outside the world still runs, it is just not
understood. The CLIP tokenizer lowercases (captions arrive in any case); the VLM tokenizer keeps case
so the answer letters "A"/"B" never share a token with the article "a".
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from tokenizers import Tokenizer, normalizers, pre_tokenizers, processors
from tokenizers.models import WordLevel
from transformers import PreTrainedTokenizerFast

from faithtests.models.interfaces import DESCRIPTION_SLOT
from faithtests.protocols.acbench import prompts as acbench_prompts
from faithtests.protocols.acbench.stimuli import BEHAVIOUR, FRAMING, mood_items
from faithtests.protocols.imavb.prompts import A1_INSTRUCTION, a1_text
from faithtests.protocols.imavb.records import OPTION_E, OPTION_F
from faithtests.protocols.imavb.stimuli import premise_items
from faithtests.protocols.lgip.paraphrase import SIMPLE_TEMPLATES
from faithtests.protocols.s3e.prompts import S3E_TEMPLATE
from faithtests.protocols.s3e.stimuli import s3e_records
from faithtests.protocols.spdfaith import prompts as spdfaith_prompts
from faithtests.protocols.spdfaith.stimuli import claims_text, pair_items
from faithtests.reference.grounding_prompts import CAPTION_QUESTION, VERIFY_TEMPLATE
from faithtests.world.captions import NUMBER_WORDS, PLURAL, SYNONYMS, WHERE
from faithtests.world.emotion import EMOTIONS
from faithtests.world.items import caption_items
from faithtests.world.scene import BRIGHTNESS, COLOURS, POSITIONS, SHAPES, SIZES, WARMTH

SPECIALS: tuple[str, ...] = ("[PAD]", "[UNK]", "<s>", "</s>", "<image>")
#: Added to the VLM tokenizer (matched before the word split) for AC-Bench's App. C.3 layout: the two
#: markers would split into "<", word, ">" (not in the vocabulary), and ``"""`` must stay its own token
#: so a description ending in "." keeps an exact span (the word split makes '."""' one token).
LAYOUT_TOKENS: tuple[str, ...] = ("<desc_start>", "<desc_end>", '"""')
_WORD = re.compile(r"\w+|[^\w\s]+")  # the Whitespace pre-tokenizer's pattern
VOCAB_SEED = 20240521  # fixed: the vocabulary must not depend on a training seed
#: The fixed prompt texts the reference VLMs are trained on, in the order their words enter the
#: vocabulary (it was once the alphabetical order of their names in one module).
PROMPT_TEXTS: tuple[str, ...] = (
    CAPTION_QUESTION, spdfaith_prompts.COUNT_QUESTION, DESCRIPTION_SLOT, spdfaith_prompts.DIFFERENT_QUESTION,
    acbench_prompts.EMOTION_DESCRIPTION, acbench_prompts.EMOTION_QUESTION, acbench_prompts.EMOTION_TASK,
    acbench_prompts.IMAGE_ONLY_EMOTION, A1_INSTRUCTION, S3E_TEMPLATE, spdfaith_prompts.SAME_QUESTION,
    acbench_prompts.TEXT_ONLY_EMOTION, VERIFY_TEMPLATE, "[" + ", ".join(EMOTIONS) + "]",
)


def words(text: str) -> list[str]:
    return _WORD.findall(text)


def world_corpus() -> Iterable[str]:
    """Every kind of text the world produces (word lists, templates, prompts, a sample of items)."""
    yield " ".join(COLOURS + SHAPES + tuple(PLURAL.values()) + POSITIONS + SIZES + BRIGHTNESS + WARMTH)
    yield " ".join(NUMBER_WORDS + EMOTIONS) + " " + " ".join(WHERE.values())
    yield " ".join(SIMPLE_TEMPLATES) + " " + " ".join(SYNONYMS.values())
    yield " ".join(f for fs in FRAMING.values() for f in fs) + " " + " ".join(BEHAVIOUR.values())
    yield " ".join([OPTION_E, OPTION_F, "Yes No yes no TRUE FALSE A B C D E F USER ASSISTANT SYSTEM : ."])
    yield from PROMPT_TEXTS
    # filled: a quoted caption makes '"' a word of its own (in the templates it touches the braces)
    yield S3E_TEMPLATE.format(a="x", b="x") + " " + VERIFY_TEMPLATE.format(c="x")
    yield " ".join(spdfaith_prompts.find_text(n) for n in range(1, 6))
    yield a1_text("?", ["x"] * 6)
    yield "What is nothing ?"
    for c in caption_items(200, VOCAB_SEED):
        yield from c.captions
    for w in s3e_records(100, VOCAB_SEED):
        yield " ".join(w.record.captions().values())
    for p in premise_items(100, VOCAB_SEED):
        yield p.standard.question + " " + p.misleading.question + " " + " ".join(p.standard.options)
    for m in mood_items(100, VOCAB_SEED):
        yield " ".join(d.text for d in m.descriptions)
        yield acbench_prompts.text_only_emotion_prompt(m.descriptions[0].text).text
    for pair in pair_items(100, VOCAB_SEED):
        yield claims_text(pair.edits)


def world_vocab(lowercase: bool) -> dict[str, int]:
    seen: dict[str, int] = {s: i for i, s in enumerate(SPECIALS)}
    for text in world_corpus():
        for w in words(text.lower() if lowercase else text):
            if w not in seen:
                seen[w] = len(seen)
    return seen


def add_layout_tokens(tok: Any) -> int:
    """Add :data:`LAYOUT_TOKENS` to a VLM tokenizer (the triple quote keeps its vocabulary id); returns
    how many ids are new (0 when it has them): the model's embeddings must then grow to ``len(tok)``."""
    before = len(tok)
    tok.add_tokens(list(LAYOUT_TOKENS))
    return len(tok) - before


def build_tokenizer(lowercase: bool, add_bos_eos: bool) -> Any:
    """A ``PreTrainedTokenizerFast`` (returned as Any: transformers' class is untyped)."""
    vocab = world_vocab(lowercase)
    tok = Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    if lowercase:
        tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    if add_bos_eos:
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A </s>", special_tokens=[("<s>", vocab["<s>"]), ("</s>", vocab["</s>"])]
        )
    return PreTrainedTokenizerFast(  # type: ignore[no-untyped-call]
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", bos_token="<s>", eos_token="</s>",
        extra_special_tokens={"image_token": "<image>"} if not add_bos_eos else None,
    )
