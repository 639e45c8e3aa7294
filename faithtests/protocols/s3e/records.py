"""The S3E record (I, c+, c_pres, c_lex, c_stress, c_rand, t) of S3E Eq. 11, plus provenance.

Records are built (and degenerate ones excluded and counted) by ``faithtests.protocols.s3e.roles``;
this module only holds the typed value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

StressType = Literal["object", "attribute", "relation", "compositional"]
STRESS_TYPES: Final[tuple[StressType, ...]] = ("object", "attribute", "relation", "compositional")


@dataclass(frozen=True)
class S3ERecord:
    """One S3E source record (S3E Eq. 11, Table 3).

    ``image_ref`` is whatever the image loader resolves (a file name relative to the dataset's image
    root, or a reference-world scene id). ``c_pos`` is the image-supported positive c+ (A/B gold and the
    reference state of Eq. 2); ``c_pres`` and ``c_lex`` are distinct meaning-preserving controls;
    ``c_stress`` is the meaning-changing foil of type ``stress_type``; ``c_rand`` is the positive caption
    of another item (``rand_item_id``) on another image (``rand_image_ref``).
    """

    item_id: str
    image_ref: str
    c_pos: str
    c_pres: str
    c_lex: str
    c_stress: str
    c_rand: str
    stress_type: StressType
    source: str
    rand_item_id: str | None = None
    rand_image_ref: str | None = None

    def captions(self) -> dict[str, str]:
        """Role -> caption, with the role names of ``faithtests.protocols.s3e.layout.ROLES``."""
        return {
            "pos": self.c_pos,
            "pres": self.c_pres,
            "lex": self.c_lex,
            "stress": self.c_stress,
            "rand": self.c_rand,
        }
