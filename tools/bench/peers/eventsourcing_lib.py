"""The ``eventsourcing`` library's SQLite application recorder (optional: ``pip install
eventsourcing``): one aggregate per session, ``originator_version`` = seq kept by the caller,
payloads encoded with orjson, ``synchronous=NORMAL`` like eventstore."""

from __future__ import annotations

import uuid

import orjson

NAME = "eventsourcing SQLite recorder"


def available() -> str:
    """'' when the library imports, else why not."""
    try:
        import eventsourcing.sqlite  # noqa: F401
    except Exception as e:
        return f"not installed (pip install eventsourcing): {type(e).__name__}"
    return ""


class Recorder:
    """A recorder on ``path``; :meth:`append` and :meth:`append_many` store events of one
    aggregate (``oid``), :meth:`messages` derives its chat messages in Python."""

    def __init__(self, path):
        from eventsourcing.persistence import StoredEvent
        from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteConnectionPool, SQLiteDatastore

        class NormalPool(SQLiteConnectionPool):
            def _create_connection(self):
                conn = super()._create_connection()
                conn._sqlite_conn.execute("PRAGMA synchronous = NORMAL")
                return conn

        self.StoredEvent = StoredEvent
        self.datastore = SQLiteDatastore(str(path))
        self.datastore.pool.close()
        self.datastore.pool = NormalPool(db_name=str(path))
        self.recorder = SQLiteApplicationRecorder(self.datastore)
        self.recorder.create_table()
        self.oid, self.version = uuid.uuid4(), 0

    def _stored(self, type_: str, payload: dict):
        self.version += 1
        return self.StoredEvent(originator_id=self.oid, originator_version=self.version - 1, topic=type_,
                                state=orjson.dumps(payload))

    def append(self, type_: str, payload: dict) -> None:
        """Store one event (one ``insert_events`` call)."""
        self.recorder.insert_events([self._stored(type_, payload)])

    def append_many(self, events) -> None:
        """Store a batch in one ``insert_events`` call."""
        self.recorder.insert_events([self._stored(t, p) for t, p in events])

    def messages(self) -> list[dict]:
        """The aggregate's chat messages: ``select_events``, orjson, mapped in Python."""
        from ..data import derive

        return derive({"type": s.topic, **orjson.loads(s.state)} for s in self.recorder.select_events(self.oid))

    def close(self) -> None:
        """Close the recorder's connections."""
        self.datastore.close()
