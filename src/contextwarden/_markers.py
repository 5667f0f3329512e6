"""The lines contextwarden writes into the content it shortens, and the references they name.

A masked tool result keeps its head and tail lines around :data:`MASK_MARKER_RE`'s line and, after
it, :data:`NAMES_LINE_RE`'s line naming what the omitted lines held; a result a later one
superseded becomes :data:`SUPERSEDED_MARKER_RE`'s line alone. Each names the ``cw:`` reference
(:data:`REF_PATTERN`) its original is kept under. The mask writes them; the summarizers' readers
(which must not take them for the tool's output), the recall tool and the proxy read them.
"""

from __future__ import annotations

import re

__all__ = [
    "MASK_MARKER_RE",
    "NAMES_LINE_PREFIX",
    "NAMES_LINE_RE",
    "REF_PATTERN",
    "SUPERSEDED_MARKER_RE",
    "without_mask_lines",
]

#: A reference to elided originals as :func:`contextwarden.strategies.base.make_ref` writes it.
REF_PATTERN = r"cw:[0-9a-f]{16}"

#: A line produced by :func:`contextwarden.layers.mask.mask_text`; its presence means "already
#: masked".
MASK_MARKER_RE = re.compile(
    r"^\[\.\.\. \d+ lines, \d+ characters omitted(?:; recall cw:[0-9a-f]+)? \.\.\.\]$",
    re.MULTILINE,
)

#: The one-line marker of :func:`contextwarden.layers.mask.superseded_text`.
SUPERSEDED_MARKER_RE = re.compile(
    r"^\[\.\.\. superseded(?: by \S+)?: \d+ lines, \d+ characters omitted"
    r"(?:; recall cw:[0-9a-f]+)? \.\.\.\]$",
    re.MULTILINE,
)

#: The line after the marker naming the files and code names of the omitted lines (the names
#: are its group).
NAMES_LINE_PREFIX = "[names in them: "
NAMES_LINE_RE = re.compile(r"^\[names in them: ([^\n]*)\]$", re.MULTILINE)

#: Any of the three lines, with its line break.
_MASK_LINES = re.compile(
    "|".join(f"(?:{p.pattern}\\n?)" for p in (MASK_MARKER_RE, SUPERSEDED_MARKER_RE, NAMES_LINE_RE)),
    re.MULTILINE,
)


def without_mask_lines(text: str) -> str:
    """``text`` without the lines a mask wrote into it: not the tool's output, so never, for
    instance, the line that names its error."""
    return _MASK_LINES.sub("", text) if "[... " in text or NAMES_LINE_PREFIX in text else text
