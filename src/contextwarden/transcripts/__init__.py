"""Readers of recorded agent sessions, one module per format.

:func:`contextwarden._transcripts.load_transcript` detects the format and calls the reader;
each reader turns its records into canonical :class:`~contextwarden.Message` values and one
:class:`Transcript`. Provider-format files (OpenAI, Anthropic, mini-swe-agent) go through the
adapters in :mod:`contextwarden.formats`.
"""

from __future__ import annotations

from ._common import FORMATS, Transcript, TranscriptFormat

__all__ = ["FORMATS", "Transcript", "TranscriptFormat"]
