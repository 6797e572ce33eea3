"""Checks of what callers pass in: event types, timestamps, seqs, session ids.

Each raises :class:`~eventstore.errors.InvalidEvent` with a sentence saying what is wrong.
"""

from __future__ import annotations

import math

from eventstore.errors import InvalidEvent

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (eventstore's start-up)
if TYPE_CHECKING:
    from typing import Any

__all__ = ["check_seq", "check_session_id", "check_ts", "check_type"]


def check_type(type_: Any) -> None:
    """Refuse an event type that is not a plain non-empty str UTF-8 can hold, or ``session/meta``."""
    if type(type_) is not str or not type_:
        if isinstance(type_, str) and type_:  # a StrEnum member, say: stored types are plain text
            raise InvalidEvent(f"event type must be a plain str, not a {type(type_).__name__} "
                               f"(a str subclass): pass str.__str__ of it, {str.__str__(type_)!r}")
        raise InvalidEvent(f"event type must be a non-empty string, not {type_!r}")
    if type_ == "session/meta":
        raise InvalidEvent("event type 'session/meta' is reserved for the first line of a JSONL file")
    if not type_.isascii():
        try:
            type_.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidEvent(f"event type {type_!r} holds a lone UTF-16 surrogate") from None


def check_ts(ts: Any) -> float:
    """A finite number of seconds as the float stored (``-0.0`` as ``0.0``)."""
    try:  # an int past a double's range raises OverflowError in float() and isfinite()
        ok = not isinstance(ts, bool) and isinstance(ts, (int, float)) and math.isfinite(ts)
    except OverflowError:
        ok = False
    if not ok:
        raise InvalidEvent(f"ts must be a finite number of seconds since the epoch, not {ts!r:.80}")
    return float(ts) + 0.0  # -0.0 is stored (and read back) as 0.0


def check_seq(seq: Any, what: str = "expected_seq") -> int:
    """An integer >= 0 (not a bool); ``what`` names it in the error."""
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        raise InvalidEvent(f"{what} must be an integer >= 0, not {seq!r}")
    return seq


def check_session_id(session_id: Any) -> str:
    """A non-empty str that UTF-8 can hold."""
    if type(session_id) is not str or not session_id:
        raise InvalidEvent(f"session id must be a non-empty string, not {session_id!r}")
    try:
        session_id.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidEvent(f"session id {session_id!r} holds a lone UTF-16 surrogate") from None
    return session_id
