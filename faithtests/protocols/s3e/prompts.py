"""S3E forced-choice prompts of one record (S3E §3.2, App. A, App. M).

Every candidate k is paired with c+ in both orders: orig [c+, k] (c+ is A) and swap [k, c+] (c+ is B).
The positive-vs-positive prompt [c+, c+] is one prompt whatever the order, so a record needs
1 + 4 × 2 = 9 prompts; all share the image and the question head, so the model's prefix cache runs
that part once per record.
"""

from __future__ import annotations

from PIL import Image

from faithtests.models.interfaces import Prompt
from faithtests.protocols.s3e.layout import ORIG, POS, ROLES, SWAP
from faithtests.protocols.s3e.records import S3ERecord

#: A/B prompt text (S3E App. A); the image travels in ``Prompt.images`` and the chat template places it.
S3E_TEMPLATE = 'Which caption better matches the image? Answer only A or B.\nA: "{a}"\nB: "{b}"'
#: (order, role) of each of the 9 prompts; the positive reference fills both order slots.
PROMPT_SLOTS: tuple[tuple[int, int], ...] = (
    (ORIG, POS), *((o, r) for r in range(1, len(ROLES)) for o in (ORIG, SWAP)),
)


def s3e_prompt(image: Image.Image, caption_a: str, caption_b: str) -> Prompt:
    return Prompt(images=(image,), text=S3E_TEMPLATE.format(a=caption_a, b=caption_b))


def candidates(record: S3ERecord) -> tuple[str, ...]:
    """Caption of each role, in ``ROLES`` order (pos, pres, lex, stress, rand)."""
    return (record.c_pos, record.c_pres, record.c_lex, record.c_stress, record.c_rand)


def record_prompts(record: S3ERecord, image: Image.Image) -> list[Prompt]:
    """The 9 prompts of ``record`` in ``PROMPT_SLOTS`` order."""
    cands = candidates(record)
    out = []
    for order, role in PROMPT_SLOTS:
        k = cands[role]
        a, b = (record.c_pos, k) if order == ORIG else (k, record.c_pos)
        out.append(s3e_prompt(image, a, b))
    return out
