"""The OpenAI Agents SDK's ``SQLiteSession`` (optional: ``pip install openai-agents``).

Run at eventstore's durability: the SDK turns WAL on and leaves SQLite's ``synchronous``
at its default, ``FULL`` (an fsync per commit), while eventstore's ``normal`` runs
``NORMAL``. :func:`session` sets the SDK's connections to the level the benchmark's
``--durability`` gives eventstore, so the figures compare code, not settings, and
:func:`settings` reads back what each side's connections actually ran, for the tables.
"""

from __future__ import annotations

NAME = "Agents SDK SQLiteSession"
#: ``synchronous`` of each eventstore durability on SQLite (eventstore's engine sets the same).
SYNCHRONOUS = {"normal": "NORMAL", "full": "FULL"}
_LEVELS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}


def available() -> str:
    """'' when the SDK imports, else why not."""
    try:
        from agents import SQLiteSession  # noqa: F401
    except Exception as e:  # ImportError, or a broken install
        return f"not installed (pip install openai-agents): {type(e).__name__}"
    return ""


def session(session_id: str, path, durability: str = "normal"):
    """A ``SQLiteSession`` on ``path`` whose connections run ``synchronous`` at eventstore's
    ``durability`` (``normal``: NORMAL; ``full``: FULL, the SDK's own default)."""
    from agents import SQLiteSession

    level = SYNCHRONOUS[durability]

    class LevelSQLiteSession(SQLiteSession):
        @staticmethod
        def _configure_connection(conn) -> None:
            SQLiteSession._configure_connection(conn)
            conn.execute(f"PRAGMA synchronous = {level}")

    return LevelSQLiteSession(session_id, path)


def settings(conn) -> str:
    """``journal_mode`` and ``synchronous`` as the sqlite3 connection ``conn`` reports them."""
    mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    level = conn.execute("PRAGMA synchronous").fetchone()[0]
    return f"journal_mode={mode.upper()}, synchronous={_LEVELS.get(level, level)}"


def session_settings(sdk) -> str:
    """What the SDK session's open connections ran (one per worker thread that used it),
    read back from them; '' when none is open yet."""
    found = sorted({settings(c) for c in list(getattr(sdk, "_connections", ()))})
    return "; ".join(found)


def item(type_: str, payload: dict) -> dict:
    """An event as the item the SDK stores for it (the chat message; chunks have none)."""
    if type_ == "tool/result":
        return {"type": "function_call_output", "call_id": payload.get("tool_call_id", "c"),
                "output": payload["content"]}
    role = "user" if type_ == "user/message" else "assistant"
    content = payload.get("content") if "content" in payload else payload["delta"]["content"]
    return {"role": role, "content": content}
