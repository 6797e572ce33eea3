"""The core storage contract (:class:`eventstore.backends.base.Backend`), tested directly
against each backend: one class of tests written against the contract, subclassed per
backend (SQLite, PostgreSQL, and a dict backend of the tests that implements the core
only). A new backend's author subclasses :class:`CoreContract` with a ``backend``
fixture and passes it.

:class:`TestDictStore` then proves that the core alone is enough for ``EventStore``: the
dict backend has no capability of its own, and append, read, messages, search, export,
import, verify, follow and the viewer's index all work through the fallbacks.
"""

from __future__ import annotations

import io
import json
import threading

import pytest
from dict_backend import DictBackend

from eventstore import EventStore
from eventstore.backends import base
from eventstore.backends.base import Backend
from eventstore.backends.capabilities import (
    CAPABILITIES,
    AuditReads,
    LogViews,
    Redactor,
    Roles,
    SearchIndex,
    SessionIndex,
    SqlSandbox,
)
from eventstore.backends.fallbacks import FALLBACKS, capability
from eventstore.errors import (
    AppendOnlyViolation,
    DatabaseError,
    QueryError,
    SeqConflict,
    SessionExists,
    SessionNotFound,
)
from eventstore.log.chain import chain_hash, genesis_hash
from eventstore.log.line import event_line

CORE = {"open", "close", "create_session", "session_meta", "sessions", "append", "event_by_id", "session_events",
        "events_after", "last_position", "follower", "import_transaction", "import_lock", "import_owner_alive",
        "imports", "messages_json"}


def test_the_core_contract_is_its_sixteen_methods():
    """The core is what a backend must write; everything else has a default or a fallback."""
    assert set(Backend.__abstractmethods__) == CORE
    assert set(FALLBACKS) == set(CAPABILITIES)
    for kind in CAPABILITIES:  # no capability method is part of the core
        assert not set(kind.__abstractmethods__) & CORE, kind


def _payload(**kw) -> str:
    return json.dumps(kw, separators=(",", ":"))


class CoreContract:
    """The contract, against ``backend`` (a fresh, empty database): subclass with a fixture."""

    @pytest.fixture
    def backend(self):  # pragma: no cover - each subclass opens its own
        raise NotImplementedError

    def test_sessions_are_created_once_and_listed_oldest_first(self, backend: Backend):
        assert backend.sessions() == [] and backend.session_meta("a") is None
        backend.create_session("b", 2.0, '{"x":1}')
        backend.create_session("a", 1.0, "{}")
        with pytest.raises(SessionExists):
            backend.create_session("a", 3.0, "{}")
        assert backend.session_meta("b") == '{"x":1}'
        assert backend.sessions() == [("a", 1.0, 0, None), ("b", 2.0, 0, None)]

    def test_append_numbers_and_chains_the_events(self, backend: Backend):
        backend.create_session("a", 1.0, "{}")
        backend.create_session("b", 1.0, "{}")
        seq, pos, h = backend.append("a", ["t", "u"], [1.5, 2.0], [_payload(i=0), "{}"], None)
        assert (seq, pos) == (0, 1)
        h0 = chain_hash(genesis_hash("a"), event_line("t", 0, 1.5, _payload(i=0)))
        assert h == chain_hash(h0, event_line("u", 1, 2.0, "{}"))
        assert backend.append("b", ["t"], [3.0], ["{}"], 0)[:2] == (0, 3)  # positions are global
        assert backend.append_one("a", "t", 4.0, "{}", 2)[:2] == (2, 4)
        assert backend.next_seq("a") == 3 and backend.next_seq("zz") == 0
        assert backend.sessions()[0] == ("a", 1.0, 3, 4.0)

    def test_append_refuses_a_stale_seq_and_an_unknown_session(self, backend: Backend):
        backend.create_session("a", 1.0, "{}")
        backend.append("a", ["t"], [1.0], ["{}"], None)
        with pytest.raises(SeqConflict) as e:
            backend.append("a", ["t"], [1.0], ["{}"], 0)
        assert e.value.actual_seq == 1
        with pytest.raises(SessionNotFound):
            backend.append("nope", ["t"], [1.0], ["{}"], None)
        assert backend.next_seq("a") == 1 and backend.last_position() == 1

    def test_event_ids_are_unique_per_session(self, backend: Backend):
        backend.create_session("a", 1.0, "{}")
        backend.append("a", ["t"], [1.0], [_payload(event_id="k")], None)
        assert backend.event_by_id("a", "k") == (0, 1, "t", 1.0, _payload(event_id="k"))
        assert backend.event_by_id("a", "other") is None
        with pytest.raises(AppendOnlyViolation):
            backend.append("a", ["t", "t"], [2.0, 2.0], ["{}", _payload(event_id="k")], None)
        assert backend.next_seq("a") == 1  # all of the batch or nothing

    def test_session_events_pages_filters_and_reads_the_last(self, backend: Backend):
        backend.create_session("a", 1.0, "{}")
        backend.append("a", ["x", "y"] * 5, [float(i) for i in range(10)], [_payload(i=i) for i in range(10)], None)
        rows = backend.session_events("a")
        assert [r[0] for r in rows] == list(range(10)) and [r[1] for r in rows] == list(range(1, 11))
        assert rows[3] == (3, 4, "y", 3.0, _payload(i=3))
        assert [r[0] for r in backend.session_events("a", 6)] == [7, 8, 9]
        assert [r[0] for r in backend.session_events("a", -1, ["y"], 2)] == [1, 3]
        assert [r[0] for r in backend.session_events("a", -1, ["x"], 2, last=True)] == [6, 8]
        assert backend.session_events("nope") == []

    def test_events_after_reads_every_session_in_position_order(self, backend: Backend):
        for sid in "ab":
            backend.create_session(sid, 1.0, "{}")
        backend.append("a", ["t"], [1.0], ["{}"], None)
        backend.append("b", ["t", "t"], [1.0, 1.0], ["{}", "{}"], None)
        backend.append("a", ["t"], [1.0], ["{}"], None)
        assert [(r[0], r[1], r[2]) for r in backend.events_after(0, 10)] == [(1, "a", 0), (2, "b", 0), (3, "b", 1),
                                                                            (4, "a", 1)]
        assert [r[0] for r in backend.events_after(1, 2)] == [2, 3]
        assert backend.last_position() == 4

    def test_messages_json_is_the_projection(self, backend: Backend):
        backend.create_session("a", 1.0, "{}")
        backend.append("a", ["user/message", "step/start", "assistant/message"], [1.0] * 3,
                       [_payload(content="hi"), "{}", _payload(content="yo")], None)
        assert json.loads(backend.messages_json("a")) == [{"role": "user", "content": "hi"},
                                                          {"role": "assistant", "content": "yo"}]
        assert json.loads(backend.messages_json("a", 1)) == [{"role": "user", "content": "hi"}]
        assert backend.messages_json("nope") == "[]"

    def test_an_import_is_hidden_until_it_ends_and_rolled_back_when_it_fails(self, backend: Backend):
        lock = backend.import_lock("imp")
        assert lock is not None
        h0 = chain_hash(genesis_hash("imp"), event_line("t", 0, 1.0, "{}"))

        def first(tx):
            assert tx.session_meta() is None and tx.importing() is None
            assert tx.create_session(5.0, "{}") is None
            tx.begin_import(tx.next_position(), lock.owner, 5.0)
            return tx.insert([(0, "t", 1.0, "{}", h0)], tx.next_position())

        assert backend.import_transaction("imp", first) is None
        assert backend.import_owner_alive(lock.owner)  # its importing row names a held lock
        assert backend.session_meta("imp") is None and backend.sessions() == []
        assert [(r[0], r[2]) for r in backend.imports()] == [("imp", lock.owner)]
        assert backend.events_after(0, 10) == [] and backend.last_position() == 0
        assert backend.last_position([lock.owner]) == 1  # a dead importer's barrier is passed
        backend.create_session("other", 1.0, "{}")
        backend.append("other", ["t"], [1.0], ["{}"], None)
        assert backend.events_after(0, 10) == [] and backend.last_position() == 0  # readers wait at the import
        assert [r[:3] for r in backend.events_after(0, 10, [lock.owner])] == [(2, "other", 0)]

        def failing(tx):
            tx.insert([(1, "t", 1.0, "{}", chain_hash(h0, event_line("t", 1, 1.0, "{}")))], tx.next_position() - 1)
            raise RuntimeError("boom")

        with pytest.raises(RuntimeError):
            backend.import_transaction("imp", failing)

        def last(tx):
            assert tx.importing() == (1, lock.owner) and tx.next_seq() == 1
            assert tx.stored(0, 0) == [(0, "t", 1.0, "{}", h0)]
            assert tx.event_id_seq("nope") is None
            tx.end_import()
            return "done"

        assert backend.import_transaction("imp", last) == "done"
        assert backend.session_meta("imp") == "{}" and backend.imports() == []
        assert [r[:3] for r in backend.events_after(0, 10)] == [(1, "imp", 0), (2, "other", 0)]
        lock.release(True)
        assert not backend.import_owner_alive(lock.owner)

    def test_an_import_reports_a_refused_row(self, backend: Backend):
        backend.create_session("a", 1.0, "{}")
        backend.append("a", ["t"], [1.0], [_payload(event_id="k")], None)

        def body(tx):
            assert tx.create_session(2.0, "{}").code == base.SESSION_EXISTS
            h = backend.event_by_id("a", "k") and tx.stored(0, 0)[0][4]
            row = (1, "t", 1.0, _payload(event_id="k"), chain_hash(h, event_line("t", 1, 1.0, _payload(event_id="k"))))
            return tx.insert([row], tx.next_position() - 1)

        index, refusal = backend.import_transaction("a", body)
        assert index == 0 and refusal.code == base.EVENT_ID_TAKEN
        assert backend.next_seq("a") == 1

    def test_a_follower_wakes_for_a_commit(self, backend: Backend):
        backend.create_session("a", 1.0, "{}")
        follower = backend.follower(0.01)
        try:
            assert follower.events_after(0, 10) == [] and follower.imports() == []
            t = threading.Timer(0.2, lambda: backend.append("a", ["t"], [1.0], ["{}"], None))
            t.start()
            deadline = 20.0
            while not follower.events_after(0, 10):  # may wake before the commit: look again
                assert follower.wait_for_commit(deadline), "no commit seen"
            t.join()
            assert [r[:3] for r in follower.session_events_after("a", -1, 10)] == [(1, "a", 0)]
        finally:
            follower.close()


    def test_a_redaction_appends_its_event_and_changes_only_the_named_event(self, backend: Backend):
        """Redactor (docs/redaction.md), on a backend that has it: the redaction event at the
        head, chained like any append; the event's payload and salt changed, nothing else; a
        stale hash is a ConflictError naming the session and seq, with nothing written."""
        if not isinstance(backend, Redactor):
            pytest.skip(f"the {backend.name} backend has no Redactor capability")
        from eventstore.errors import ConflictError
        from eventstore.log.commit import commit_json, new_salts
        from eventstore.log.redaction import redacted_payload, redaction_record

        backend.create_session("a", 1.0, "{}")
        salts = new_salts(3)
        payloads = [{"content": "hi"}, {"content": "sk-secret", "n": 1}, {"content": "x"}]
        backend.append("a", ["t"] * 3, [1.0] * 3, [json.dumps(p, separators=(",", ":")) for p in payloads], None,
                       salts=salts, commits=[commit_json(s, p) for s, p in zip(salts, payloads, strict=True)])
        rows = {r[0]: r for r in capability(backend, AuditReads).verify_rows("a")}
        paths, new, _ = redacted_payload("a", 1, payloads[1], ["content"], "k")
        body, new_salt = redaction_record(1, paths, "k", "me", rows[1][5], payloads[1], salts[1], [])
        record = json.dumps(body, separators=(",", ":"))
        rsalt = new_salts(1)[0]
        with pytest.raises(ConflictError, match="session 'a', seq 1"):
            backend.redact_event("a", 1, "0" * 64, json.dumps(new), new_salt, 2.0, record, rsalt,
                                 commit_json(rsalt, json.loads(record)))
        assert backend.redact_event("a", 1, rows[1][5], json.dumps(new, separators=(",", ":")), new_salt, 2.0,
                                    record, rsalt, commit_json(rsalt, json.loads(record))) == 3
        after = {r[0]: r for r in capability(backend, AuditReads).verify_rows("a")}
        assert after[1][4] == '{"content":"[redacted: k]","n":1}' and bytes(after[1][6]) == new_salt  # n's salt
        assert [after[s] for s in (0, 2)] == [rows[s] for s in (0, 2)] and after[1][:4] == rows[1][:4]
        assert after[1][5] == rows[1][5] and after[3][2] == "redaction" and bytes(after[3][6]) == rsalt
        from eventstore.audit.verify import verify

        report = verify(backend)
        assert report.ok, report.findings
        assert [(r.seq, r.kind) for r in report.redactions] == [(1, "salted")]
        assert backend.erase_old_versions() is None


class TestSQLiteContract(CoreContract):
    @pytest.fixture
    def backend(self, tmp_path):
        from eventstore.backends.sqlite import SQLiteBackend

        b = SQLiteBackend.open(str(tmp_path / "contract.db"), busy_timeout=5.0)
        yield b
        b.close()


class TestPostgresContract(CoreContract):
    @pytest.fixture
    def backend(self, pg_url):
        from eventstore.backends.postgres import PostgresBackend

        b = PostgresBackend.open(pg_url, busy_timeout=5.0)
        yield b
        b.close()


class TestDictContract(CoreContract):
    @pytest.fixture
    def backend(self):
        return DictBackend.open("dict:contract")


# --- the store on the core alone ------------------------------------------------------------

@pytest.fixture
def dict_store():
    with EventStore(DictBackend.open("dict:store")) as store:
        yield store


def test_a_core_only_backend_has_no_capability_of_its_own(dict_store):
    for kind in CAPABILITIES:
        assert not isinstance(dict_store._backend, kind)
        assert type(dict_store.capability(kind)) is FALLBACKS[kind]
    # a backend that has a capability hands out itself
    from eventstore.backends.sqlite import SQLiteBackend

    assert issubclass(SQLiteBackend, (SearchIndex, AuditReads, SessionIndex, LogViews, SqlSandbox))
    with EventStore.open(":memory:") as sqlite:
        assert sqlite.capability(SearchIndex) is sqlite._backend
        assert type(sqlite.capability(Roles)) is FALLBACKS[Roles]


class TestDictStore:
    """EventStore's main API on the dict backend: each capability through its fallback."""

    def test_append_read_and_retry(self, dict_store):
        s = dict_store.create_session("s", meta={"model": "m"})
        e = s.append("user/message", {"content": "hello"}, event_id="k1")
        assert (e.seq, e.position) == (0, 1)
        assert s.append("user/message", {"content": "hello"}, event_id="k1") == e  # an idempotent retry
        s.append_many([("assistant/message", {"content": "world", "usage": {"input_tokens": 3,
                                                                             "output_tokens": 4}}),
                       ("turn/end", {})])
        with pytest.raises(SeqConflict):
            s.append("x", {}, expected_seq=1)
        assert [ev.type for ev in s.events()] == ["user/message", "assistant/message", "turn/end"]
        assert [ev.seq for ev in s.events(last=1)] == [2]
        assert s.derive_messages() == [{"role": "user", "content": "hello", },
                                       {"role": "assistant", "content": "world"}]
        assert s.messages_size() > 0
        assert [i.id for i in dict_store.sessions()] == ["s"] and dict_store.last_position() == 3

    def test_search_scans_without_an_index(self, dict_store):
        from eventstore import search

        s = dict_store.create_session("s")
        s.append("user/message", {"content": "the quick brown fox"})
        s.append("assistant/message", {"content": "", "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\":\"foxes\"}"}}]})
        s.append("tool/result", {"tool_call_id": "c", "content": "nothing here"})
        hits = search.search(dict_store, "fox*")
        assert [(h.seq, h.score) for h in hits] == [(1, 0.0), (0, 0.0)]  # newest first
        assert "\x02fox\x03" in hits[1].snippet
        assert [h.seq for h in search.search(dict_store, "quick fox")] == [0]
        assert search.count(dict_store, "lookup") == 1
        assert search.search(dict_store, "absent") == []
        with pytest.raises(QueryError):
            search.search(dict_store, "fox", raw=True)

    def test_export_import_and_verify(self, dict_store, tmp_path):
        from eventstore.audit.verify import verify

        s = dict_store.create_session("s", meta={"k": 1})
        s.append_many([("user/message", {"content": f"m{i}"}) for i in range(5)])
        out = io.BytesIO()
        assert dict_store.export_jsonl("s", out) == 5
        text = out.getvalue()
        assert text.splitlines()[0] == b'{"type":"session/meta","id":"s","k":1}'
        with EventStore(DictBackend.open("dict:other")) as other:
            assert other.import_jsonl(io.BytesIO(text), name="s.jsonl") == "s"
            back = io.BytesIO()
            other.export_jsonl("s", back)
            assert back.getvalue() == text
            assert other.imports() == []
        report = verify(dict_store.capability(AuditReads))
        assert report.ok, report.findings
        assert report.heads["s"][0] == 5

    def test_follow_and_the_viewers_index(self, dict_store):
        s = dict_store.create_session("s")
        s.append_many([("turn/start", {}), ("user/message", {"content": "q"}),
                       ("assistant/message", {"content": "a", "tool_calls": [{"id": "c"}]}),
                       ("tool/result", {"tool_call_id": "c", "content": "r"})])
        got = list(dict_store.follow(0, idle_timeout=0.2))
        assert [e.seq for e in got] == [0, 1, 2, 3]
        index = dict_store.capability(SessionIndex)
        assert [r[0] for r in index.session_rows()] == ["s"]
        assert [r[:3] for r in index.session_counts(4)] == [("s", 4, 4)]
        assert index.state_rows(0, 4, 10) == [(1, "s", "turn/start", None), (2, "s", "user/message", None),
                                              (3, "s", "assistant/message", '[{"id":"c"}]'),
                                              (4, "s", "tool/result", "c")]

    def test_log_views_and_the_refused_capabilities(self, dict_store):
        from eventstore import search

        s = dict_store.create_session("s")
        s.append("assistant/message", {"content": "a", "usage": {"prompt_tokens": 2, "completion_tokens": 5}})
        s.append("session/info", {"title": "T"})
        assert search.usage_totals(dict_store)["s"].output_tokens == 5
        assert dict_store.capability(LogViews).info_rows() == [("s", '{"title":"T"}')]
        with pytest.raises(DatabaseError):
            dict_store.capability(Roles).roles_sql("w", "a")
        with pytest.raises(QueryError):
            dict_store.capability(SqlSandbox).query_connection("dict:store")


def test_capability_refuses_what_is_not_one():
    with pytest.raises(TypeError):
        capability(DictBackend.open("dict:x"), dict)
