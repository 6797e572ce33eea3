"""The event types the store gives a meaning to: the one list of them.

Any other non-empty type may be appended and is kept as it is; these are the ones the
projection (the ``messages`` view), the context, the tool-call rules, the viewer and
``verify`` read (``shared/spec/session-log.md``; the SQL views spell the same names).
"""

from __future__ import annotations

__all__ = [
    "ASSISTANT_CHUNK",
    "ASSISTANT_MESSAGE",
    "ASSISTANT_PART",
    "COMPACTION_BOUNDARY",
    "CONTEXT_RETRACT",
    "MESSAGE_TYPES",
    "MODEL_TOOLS",
    "SESSION_META",
    "SKILL_INJECT",
    "STEP_END",
    "STEP_START",
    "SYSTEM_MESSAGE",
    "TOOL_RESULT",
    "TURN_END",
    "TURN_START",
    "USER_MESSAGE",
]

SESSION_META = "session/meta"  #: the first line of a JSONL file; never a stored event
USER_MESSAGE = "user/message"
ASSISTANT_MESSAGE = "assistant/message"
ASSISTANT_PART = "assistant/part"  #: more tool calls of the last assistant message (a transcript's)
ASSISTANT_CHUNK = "assistant/chunk"  #: a streamed delta of the next assistant message
TOOL_RESULT = "tool/result"
TURN_START = "turn/start"
TURN_END = "turn/end"
STEP_START = "step/start"
STEP_END = "step/end"
SKILL_INJECT = "skill/inject"
SYSTEM_MESSAGE = "system/message"
MODEL_TOOLS = "model/tools"
CONTEXT_RETRACT = "context/retract"
COMPACTION_BOUNDARY = "compaction/boundary"

#: The types that become chat messages (the ``messages`` view's rows).
MESSAGE_TYPES = (USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_RESULT)
