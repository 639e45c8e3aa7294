"""S3E prompt layout: c+ is A in the original order and B in the swapped one (App. A)."""

from __future__ import annotations

from PIL import Image

from faithtests.protocols.s3e.layout import ORIG, POS, STRESS, SWAP
from faithtests.protocols.s3e.prompts import PROMPT_SLOTS, record_prompts
from faithtests.protocols.s3e.records import S3ERecord

REC = S3ERecord(item_id="i", image_ref="i", c_pos="two red circles", c_pres="red circles, two of them",
                c_lex="there are two red circles", c_stress="two blue circles", c_rand="one green square",
                stress_type="attribute", source="test", rand_item_id="j", rand_image_ref="j")


def test_nine_prompts_in_slot_order() -> None:
    image = Image.new("RGB", (8, 8))
    prompts = record_prompts(REC, image)
    assert len(prompts) == len(PROMPT_SLOTS) == 9
    assert PROMPT_SLOTS[0] == (ORIG, POS)
    assert all(p.images == (image,) for p in prompts)
    orig = prompts[PROMPT_SLOTS.index((ORIG, STRESS))].text
    swap = prompts[PROMPT_SLOTS.index((SWAP, STRESS))].text
    assert orig.endswith('A: "two red circles"\nB: "two blue circles"')
    assert swap.endswith('A: "two blue circles"\nB: "two red circles"')
    assert orig.startswith("Which caption better matches the image? Answer only A or B.")
