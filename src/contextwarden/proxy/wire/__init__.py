"""The wire formats the proxy serves, one module each, and the table the one handler reads.

A :class:`Wire` knows everything about one API that the handler, the forwarding and the recall
rounds need, and nothing else knows it:

* which paths it serves, and where the model and the streaming flag sit (the body, or the
  path for Gemini);
* how the request's history goes through the warden and back into the body (:meth:`Wire.run`),
  with the output limit the reply needs (:meth:`Wire.limit`) and the tool definitions that
  count against the window (:meth:`Wire.count_tools`);
* the provider's rules for a valid request (:meth:`Wire.problems`, from
  :mod:`contextwarden.formats.validate`, which shares no code with the repair);
* the recall tool in its shape: whether it may be offered, a round's body, a reply's turn, the
  answers, the stream splice and the whole reply the client gets.

========================  =======================  ===================================
module                    paths                    history
========================  =======================  ===================================
:mod:`.chat`              ``/v1/chat/completions``  ``messages``
:mod:`.messages`          ``/v1/messages`` (and     ``system`` + ``messages``
                          ``/count_tokens``)
:mod:`.responses`         ``/v1/responses``         ``instructions`` + ``input``
:mod:`.gemini`            ``/v1beta/models/M:       ``systemInstruction`` + ``contents``
                          generateContent`` (and
                          ``:streamGenerateContent``)
========================  =======================  ===================================
"""

from __future__ import annotations

from ._base import Ran, Splice, Turn, Wire
from .chat import CHAT
from .gemini import GEMINI
from .messages import COUNT_TOKENS, MESSAGES
from .responses import RESPONSES

__all__ = ["WIRES", "Ran", "Splice", "Turn", "Wire", "wire_for"]

#: Every wire format, by name.
WIRES: dict[str, Wire] = {w.name: w for w in (CHAT, MESSAGES, COUNT_TOKENS, RESPONSES, GEMINI)}


def wire_for(path: str) -> Wire | None:
    """The wire format serving ``path`` (a POST), None for a path the proxy only forwards."""
    for wire in WIRES.values():
        if wire.serves(path):
            return wire
    return None
