"""One model of the run as the user named it: ``--faith-model`` / ``--faith-vlm`` ``[LABEL=]SPEC``."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Literal

_LABEL = re.compile(r"^[A-Za-z0-9_.\-]+$")
#: The bundled reference models: they join a run only when it names no --faith-model and no --faith-vlm.
DEFAULT_SCORER = "reference:clip"
DEFAULT_VLM = "reference:vlm"
#: The bundled omni reference (it hears): it joins a default run only in suites whose protocol
#: manifest declares ``audio`` (it is trained for those alone).
DEFAULT_OMNI = "reference:omni"

Role = Literal["scorer", "vlm"]
OPTION_OF: dict[Role, str] = {"scorer": "--faith-model", "vlm": "--faith-vlm"}


@dataclass(frozen=True)
class ModelSpec:
    """One model of the run, parsed once from ``--faith-model`` / ``--faith-vlm`` ``[LABEL=]SPEC``.

    ``source`` is the option that named it (``scorer``: --faith-model, ``vlm``: --faith-vlm); ``role`` is
    how a test uses it: a --faith-vlm also serves the scorer suites through its caption log-likelihood
    (role ``scorer``). The label names the model in node ids, results and the scorecard. The threshold
    family is not part of the spec: the loaded adapter declares it (``fingerprint()["family"]`` and, for
    a non-cosine scorer, ``["score"]``).
    """

    label: str
    spec: str
    source: Role = "scorer"
    role: Role = "scorer"

    @classmethod
    def parse(cls, text: str, source: Role = "scorer") -> ModelSpec:
        """``[LABEL=]SPEC``: "ckpt=open_clip:..." has a label; a bare spec never has "=" before its
        first ":" and is its own label."""
        raw = text.strip()
        head, sep, tail = raw.partition("=")
        if sep and _LABEL.match(head.strip()) and ":" not in head:
            label, spec = head.strip(), tail.strip()
        else:
            label, spec = raw, raw
        if not spec or not label:
            raise ValueError(f"model spec {text!r} is empty (syntax: [LABEL=]SPEC)")
        return cls(label, spec, source, source)

    @property
    def option(self) -> str:
        """The command-line option that named this model."""
        return OPTION_OF[self.source]

    def as_scorer(self) -> ModelSpec:
        """This model in the scorer role (a --faith-vlm scored by its caption log-likelihood)."""
        return replace(self, role="scorer")
