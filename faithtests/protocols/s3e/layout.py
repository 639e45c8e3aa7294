"""Array layout shared by the S3E metrics (S3E §3.2–3.4, App. A).

Every S3E array indexes, in this order and only where the axis applies:

    [layers, items, orders, roles, (letters | D)]

* ``layers``: decoder layers, 0-based, as returned by ``VisionLanguageModel.states`` (the output of
  decoder layer ``l``; the embedding output is not a layer). The paper's indices fit this: Qwen3VL-2B
  (28 layers) reports layer 24 and a top half "14–27" (Table 7).
* ``items``: source records, the bootstrap unit (App. M.2).
* ``orders``: ``ORIG`` = 0 is ``[c+, c]`` (A = c+), ``SWAP`` = 1 is ``[c, c+]`` (B = c+) (Eqs. 1, 9, 10).
* ``roles``: ``ROLES`` = (pos, pres, lex, stress, rand). Role ``pos`` is the positive-vs-positive
  prompt ``[c+, c+]`` whose state is the matched reference h_{i,o,+} of Eq. 2 (S3E §3.4). Its two orders
  are the same prompt, so a protocol may run it once and write it into both order slots.
* ``letters``: option-letter logits ``(A, B)`` at the answer position.
"""

from __future__ import annotations

from typing import Final, Literal

Role = Literal["pos", "pres", "lex", "stress", "rand"]
Control = Literal["pres", "lex", "rand"]

ROLES: Final[tuple[Role, ...]] = ("pos", "pres", "lex", "stress", "rand")
ROLE_INDEX: Final[dict[str, int]] = {r: i for i, r in enumerate(ROLES)}
POS: Final = 0
PRES: Final = 1
LEX: Final = 2
STRESS: Final = 3
RAND: Final = 4

ORDERS: Final[tuple[str, str]] = ("orig", "swap")
ORIG: Final = 0
SWAP: Final = 1

LETTERS: Final[tuple[str, str]] = ("A", "B")
#: Letter index (0 = A, 1 = B) at which c+ is shown, per order (App. A: expected A in orig, B in swap).
POSITIVE_LETTER: Final[tuple[int, int]] = (0, 1)

CONTROLS: Final[tuple[Control, ...]] = ("pres", "lex", "rand")
