"""The OpenAI Agents SDK's ``SQLiteSession`` (optional: ``pip install openai-agents``).

Run with ``synchronous=NORMAL`` beside WAL, the durability of eventstore's ``normal`` (shipped,
the SDK leaves SQLite's ``FULL``, an fsync per commit: a comparison of settings, not of code).
"""

from __future__ import annotations

NAME = "Agents SDK SQLiteSession"
SETTINGS = "WAL, synchronous=NORMAL (set by the benchmark; shipped: FULL)"


def available() -> str:
    """'' when the SDK imports, else why not."""
    try:
        from agents import SQLiteSession  # noqa: F401
    except Exception as e:  # ImportError, or a broken install
        return f"not installed (pip install openai-agents): {type(e).__name__}"
    return ""


def session(session_id: str, path):
    """A ``SQLiteSession`` on ``path`` with eventstore's durability."""
    from agents import SQLiteSession

    class NormalSQLiteSession(SQLiteSession):
        @staticmethod
        def _configure_connection(conn) -> None:
            SQLiteSession._configure_connection(conn)
            conn.execute("PRAGMA synchronous = NORMAL")

    return NormalSQLiteSession(session_id, path)


def item(type_: str, payload: dict) -> dict:
    """An event as the item the SDK stores for it (the chat message; chunks have none)."""
    if type_ == "tool/result":
        return {"type": "function_call_output", "call_id": payload.get("tool_call_id", "c"),
                "output": payload["content"]}
    role = "user" if type_ == "user/message" else "assistant"
    content = payload.get("content") if "content" in payload else payload["delta"]["content"]
    return {"role": role, "content": content}
