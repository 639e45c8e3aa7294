"""A Griffe extension for the API pages: docstrings here use Sphinx roles (``:func:`name```), which
mkdocstrings would print verbatim; each role is dropped, leaving the name as inline code."""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:func|class|mod|meth|data|attr|exc|obj|const):`~?\.?([^`]+)`")


def plain_roles(text: str) -> str:
    """``text`` with ``:role:`~a.b``` written as ```a.b``` (the role and its ``~`` / ``.`` dropped)."""
    return _ROLE.sub(lambda m: f"`{m.group(1)}`", text)


class DropSphinxRoles(griffe.Extension):
    def on_instance(self, *, node: Any, obj: griffe.Object, agent: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = plain_roles(obj.docstring.value)
