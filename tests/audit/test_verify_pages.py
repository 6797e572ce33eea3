"""verify re-hashes a session a page of rows at a time through the shared batch paths
(eventstore.audit.verify._wants); its findings, heads and redactions must be exactly those
of the per-event rule (each row's own line and hash, each payload parsed by the walk), over
any session: tampered rows, redacted ones, unsalted ones, payloads and values no append
could write."""

from __future__ import annotations

import math
from contextlib import ExitStack
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventstore import EventStore
from eventstore.audit import verify as audit
from eventstore.backends.capabilities import AuditReads
from eventstore.log.chain import chain_hash, genesis_hash
from eventstore.log.codec import dumps
from eventstore.log.commit import commit_json
from eventstore.log.line import event_line

SID = "s"
TYPES = ["user/message", "assistant/message", "assistant/chunk", "assistant/part", "tool/result",
         "step/start", "turn/start", "redaction", "note/x"]


@pytest.fixture(scope="module")
def base_rows(tmp_path_factory) -> list[tuple]:
    """A real session's rows (``verify_rows``): chunks and their message, tool calls and
    results, and two redacted events (one redacted twice), as the store writes them."""
    path = tmp_path_factory.mktemp("pages") / "events.db"
    with EventStore.open(path) as store:
        s = store.create_session(SID)
        s.append("user/message", {"content": "hi", "secret": "tok-1", "n": 2**70})
        s.append("assistant/chunk", {"delta": {"content": "he"}})
        s.append("assistant/chunk", {"delta": {"content": "llo"}})
        s.append("assistant/message", {"content": "hello", "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}]})
        s.append("tool/result", {"tool_call_id": "a", "content": "tok-2 \ud800", "x": 1.5})
        s.append("user/message", {"content": "bye", "0": "index key"})
        store.redact(SID, 0, ["secret"], reason="r1")
        store.redact(SID, 4, ["content"], reason="r2")
        store.redact(SID, 0, ["content"], reason="r3")
        assert audit.verify(store.capability(AuditReads)).ok
        return list(store.capability(AuditReads).verify_rows(SID))


class _Rows:
    """The one read verify's walk makes of a session, from a list."""

    def __init__(self, rows: list[tuple]):
        self.rows = rows

    def verify_rows(self, sid: str):
        return iter(self.rows)


def _per_event_wants(prev_hash: str, rows: list[tuple], parsed: list) -> list[str]:
    out = []
    for seq, _position, type_, ts, payload, stored, salt in rows:
        out.append(audit._want_one(prev_hash, seq, type_, ts, payload, salt))
        prev_hash = stored if isinstance(stored, str) else ""
    return out


def _run(rows: list[tuple], *, per_event: bool, page: int) -> audit.VerifyReport:
    report = audit.VerifyReport()
    with ExitStack() as stack:
        stack.enter_context(mock.patch.object(audit, "PAGE", page))
        if per_event:  # the rule: each row's own hash, each payload parsed by the walk from its text
            stack.enter_context(mock.patch.object(audit, "_wants", _per_event_wants))
            stack.enter_context(mock.patch.object(audit, "_parsed_page", lambda payloads: [None] * len(payloads)))
        audit._verify_session(_Rows(rows), SID, report)
    return report


ODD_TEXT = st.sampled_from(["\ud800", "a\udc00b", "\ud83d\ude00", "é", "", "x\ny", '"'])
KEYS = st.one_of(st.text(max_size=4), st.sampled_from(["0", "1a", "content", "seq", "\ud800"]))
VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(min_value=-2**53, max_value=2**53),
              st.sampled_from([2**60, -2**64, 2**70, 10**20]),  # beyond 2**53: exactly doubles
              st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=6), ODD_TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=3)),
    max_leaves=6)
CALLS = st.lists(st.fixed_dictionaries({"id": st.sampled_from(["a", "b", ""])},
                                       optional={"function": st.fixed_dictionaries({"name": st.text(max_size=2)})}),
                 max_size=2)
PAYLOADS = st.builds(lambda extra, shaped: {**extra, **shaped},
                     st.dictionaries(KEYS, VALUES, max_size=3),
                     st.fixed_dictionaries({}, optional={
                         "content": st.one_of(st.text(max_size=5), ODD_TEXT, st.integers(max_value=2**53, min_value=0)),
                         "delta": st.fixed_dictionaries({}, optional={"content": st.one_of(st.text(max_size=3),
                                                                                         ODD_TEXT)}),
                         "tool_calls": st.one_of(CALLS, st.booleans()),
                         "tool_call_id": st.sampled_from(["a", "b", 5, 10**20, 2**70]),
                         "seq": st.integers(min_value=0, max_value=12)}))
EVENTS = st.lists(st.tuples(st.sampled_from(TYPES), PAYLOADS, st.one_of(st.none(), st.binary(min_size=16, max_size=16)),
                            st.floats(min_value=0, max_value=2e9, allow_nan=False)), max_size=12)
# what a tamperer (or a bug) can leave in a row's columns
ODD_PAYLOADS = st.sampled_from(['{"a":NaN}', "[1]", '"x"', "not json", '{"a":1e400}', '{"a":1}{"b":2}',
                                '{"a":"\\ud800"}', '{"a":123456789012345678901234}', b'{"a":1}', None, "{}",
                                '{ "a":1}', '{"0":1,"a":2}'])
EDITS = st.lists(st.tuples(st.integers(min_value=0, max_value=30), st.one_of(
    st.tuples(st.just("payload"), st.one_of(ODD_PAYLOADS, PAYLOADS.map(dumps))),
    st.tuples(st.just("hash"), st.sampled_from(["0" * 64, None, 5])),
    st.tuples(st.just("ts"), st.sampled_from([math.nan, math.inf, 5, 1e16, 1.0, "noon", None])),
    st.tuples(st.just("type"), st.sampled_from([5, 'a"b', "\ud800", "é", None])),
    st.tuples(st.just("salt"), st.sampled_from([None, b"\x00" * 16, b"xyz", b'{"content":"00"}'])),
    st.tuples(st.just("seq"), st.integers(min_value=-1, max_value=40)),
    st.tuples(st.just("drop"), st.none()))), max_size=4)


def _session(base: list[tuple], events: list, edits: list) -> list[tuple]:
    rows = list(base)
    prev = rows[-1][5]
    for type_, payload, salt, ts in events:  # appended as the append path would, salted or not
        seq = len(rows)
        text = dumps(payload)
        line = event_line(type_, seq, ts, text if salt is None else commit_json(salt, payload))
        prev = chain_hash(prev, line)
        rows.append((seq, seq + 1, type_, ts, text, prev, salt))
    for at, (what, value) in edits:
        if not rows:
            break
        i = at % len(rows)
        row = list(rows[i])
        if what == "drop":
            del rows[i]
            continue
        col = {"seq": 0, "type": 2, "ts": 3, "payload": 4, "hash": 5, "salt": 6}[what]
        row[col] = value
        rows[i] = tuple(row)
    return rows


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=EVENTS, edits=EDITS, page=st.integers(min_value=1, max_value=7))
def test_paged_verify_finds_what_the_per_event_rule_finds(base_rows: list[tuple], events, edits, page: int):
    rows = _session(base_rows, events, edits)
    fast = _run(rows, per_event=False, page=page)
    rule = _run(rows, per_event=True, page=page)
    assert fast.findings == rule.findings
    assert fast.heads == rule.heads and fast.events == rule.events == len(rows)
    assert fast.redactions == rule.redactions


def test_the_base_session_verifies_and_a_tampered_row_is_found_at_its_seq(base_rows: list[tuple]):
    """The property above compares against a rule that sees something: the untouched
    session is clean (its redactions proven), a tampered payload is a hash finding at its seq."""
    clean = _run(base_rows, per_event=False, page=2)
    assert clean.findings == [] and len(clean.redactions) == 3
    assert {r.kind for r in clean.redactions} == {"salted"}
    assert clean.heads[SID] == (len(base_rows), base_rows[-1][5])
    tampered = [r if r[0] != 3 else (*r[:4], r[4].replace("hello", "hellO"), *r[5:]) for r in base_rows]
    report = _run(tampered, per_event=False, page=2)
    assert [(f.kind, f.seq) for f in report.findings] == [("hash", 3), ("chunks", 3)]
    assert genesis_hash(SID) != base_rows[0][5]


def test_a_page_of_a_real_store_is_verified_in_pages(tmp_path: Path):
    """Sessions longer than a page verify clean, with the heads of the stored chain."""
    with EventStore.open(tmp_path / "e.db") as store:
        s = store.create_session(SID)
        s.append_many([("user/message", {"content": f"m{i}", "n": i * 1.5}) for i in range(2 * audit.PAGE + 3)])
        report = audit.verify(store.capability(AuditReads))
        rows = list(store.capability(AuditReads).verify_rows(SID))
    assert report.ok and report.heads[SID] == (len(rows), rows[-1][5])
