"""Salted commitments (eventstore.log.commit): the fast text equals the canonical one for any
JSON value, and a redacted event's commit payload rebuilds from digests and key salts."""

import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st

from eventstore.log.codec import dumps, loads
from eventstore.log.commit import (
    SALT_BYTES,
    commit_json,
    commit_jsons,
    commit_payload,
    key_salt,
    new_salts,
    rebuilt_commit_json,
    value_digest,
)

_scalars = (st.none() | st.booleans() | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
            | st.floats(allow_nan=False, allow_infinity=False) | st.text())
_values = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=8)
_payloads = st.dictionaries(st.text(max_size=8).filter(lambda k: k not in ("type", "seq", "ts")),
                            _values, max_size=5).map(lambda p: loads(dumps(p)))  # as stored


def _slow(salt: bytes, payload: dict) -> str:
    """The rule as docs/redaction.md states it, with the canonical encoder only."""
    def j(v):
        return dumps(v).encode("utf-8")
    return dumps({k: hashlib.sha256(hashlib.sha256(salt + j(k)).digest()[:16] + j(v)).hexdigest()
                  for k, v in payload.items()})


@settings(max_examples=300, deadline=None)
@given(_payloads, st.binary(min_size=16, max_size=16))
def test_commit_json_is_the_stated_rule(payload, salt):
    assert commit_json(salt, payload) == _slow(salt, payload)


@settings(max_examples=200, deadline=None)
@given(_payloads, st.binary(min_size=16, max_size=16), st.data())
def test_a_redacted_payload_rebuilds_its_commitment(payload, salt, data):
    removed = data.draw(st.sets(st.sampled_from(sorted(payload)) if payload else st.nothing()))
    digests = commit_payload(salt, payload)
    stored = {k: ("[redacted: x]" if k in removed else v) for k, v in payload.items()}
    kept_salts = {k: key_salt(salt, k) for k in payload if k not in removed}
    assert rebuilt_commit_json(stored, {k: digests[k] for k in removed}, kept_salts) == commit_json(salt, payload)


def test_lone_surrogates_and_odd_numbers_use_the_canonical_text():
    salt = bytes(16)
    for value in ["a\ud800b", 5.0, 1e21, -0.0, 2**60, {"1": 1, "a": 2}]:
        assert value_digest(key_salt(salt, "k"), value) == hashlib.sha256(
            key_salt(salt, "k") + dumps(value).encode()).hexdigest()
    assert key_salt(salt, "\udc00") == hashlib.sha256(salt + dumps("\udc00").encode()).digest()[:16]


def test_a_short_value_is_hidden_by_its_salt():
    salts = new_salts(2)
    assert len(salts[0]) == SALT_BYTES and salts[0] != salts[1]
    guesses = {hashlib.sha256(dumps(pin).encode()).hexdigest() for pin in range(10000)}
    assert commit_payload(salts[0], {"pin": 1234})["pin"] not in guesses
    assert commit_payload(salts[0], {"pin": 1234}) != commit_payload(salts[1], {"pin": 1234})


# 100 examples, not 300: each draws up to four recursive payloads (most of its time), and the
# rule for one payload is test_commit_json_is_the_stated_rule's, on 300
@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(_payloads, st.binary(min_size=16, max_size=16)), max_size=4))
def test_commit_jsons_is_commit_json_of_each(items):
    payloads = [p for p, _ in items]
    salts = [s for _, s in items]
    assert commit_jsons(salts, payloads) == [commit_json(s, p) for p, s in items]
    assert commit_jsons(salts, [{"1": "x", "a": 1} for _ in salts]) == [commit_json(s, {"1": "x", "a": 1})
                                                                           for s in salts]


# Values and keys orjson writes exactly as the canonical encoder does: commit_jsons takes its
# batch path (C loops over every key and value at once) for a batch of only these.
_plain_scalars = (st.none() | st.booleans() | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
                  | st.text(alphabet=st.characters(blacklist_categories=("Cs", "Nd"))))
_plain_keys = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Nd")), min_size=1, max_size=6)
_plain_values = st.recursive(_plain_scalars, lambda inner: st.lists(inner, max_size=3)
                             | st.dictionaries(_plain_keys, inner, max_size=3), max_leaves=8)
_plain_payloads = st.dictionaries(_plain_keys.filter(lambda k: k not in ("type", "seq", "ts")),
                                  _plain_values, max_size=5).map(lambda p: loads(dumps(p)))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(_plain_payloads, st.binary(min_size=16, max_size=16)), min_size=1, max_size=6))
def test_the_batch_path_is_the_stated_rule(items):
    import eventstore.log.commit as commit

    payloads = [p for p, _ in items]
    salts = [s for _, s in items]
    fast = commit._commit_jsons_fast(salts, payloads)
    if all(map(lambda p: not any(isinstance(v, list) and len(v) > 1 for v in p.values()), payloads)):
        assert fast is not None  # (a list of two strings may read as holding index keys: the screen's false hit)
    if fast is not None:
        assert fast == [_slow(s, p) for p, s in items]
    assert commit_jsons(salts, payloads) == [_slow(s, p) for p, s in items]


def test_a_batch_with_one_odd_payload_is_the_stated_rule_for_all():
    odd = [{"1": "index key", "a": 1}, {"big": 1e21}, {"small": 0.000001}, {"x": 2**60}, {"x": "a\ud800"},
           {"\udc00": 1}, {"n": {"10": 1, "a": [1, 2]}}]
    for payload in odd:
        batch = [{"content": "plain"}, payload, {"delta": {"content": "tok"}}]
        salts = new_salts(len(batch))
        assert commit_jsons(salts, batch) == [_slow(s, p) for s, p in zip(salts, batch, strict=True)], payload


def test_one_payload_alone_is_the_stated_rule():
    """A batch of one (every single append) skips the batch path: each odd payload, and a
    plain one, alone, is still the stated rule's."""
    odd = [{"1": "index key", "a": 1}, {"big": 1e21}, {"small": 0.000001}, {"x": 2**60}, {"x": "a\ud800"},
           {"\udc00": 1}, {"n": {"10": 1, "a": [1, 2]}}, {"content": "plain", "l": [1.5, None, True]}, {}]
    for payload in odd:
        salts = new_salts(1)
        assert commit_jsons(salts, [payload]) == [_slow(salts[0], payload)], payload


def test_a_batch_longer_than_a_slice_is_the_stated_rule_for_all():
    """commit_jsons takes a long batch (an import's) a slice at a time: across the slices'
    edges, and with an odd payload in one slice only, each commit is the stated rule's."""
    from eventstore.log import commit

    n = 2 * commit._SLICE + 7
    batch = [{"content": f"m{i}", "usage": {"input_tokens": i}} for i in range(n)]
    batch[commit._SLICE + 3] = {"big": 1e21}  # the second slice goes payload by payload
    salts = new_salts(n)
    assert commit_jsons(salts, batch) == [_slow(s, p) for s, p in zip(salts, batch, strict=True)]

# The hashes the store wrote for these events before commit_jsons took its batch path
# (commit dd97fa0, fixed salts): an event appended now must hash as it did then, or the
# chains of existing databases and of new events would disagree.
_PINNED_PLAIN = [{"content": "hello wörld \u2028 \"q\"",
                  "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": "{\"a\":1}"}}]},
                 {"delta": {"content": "tok"}}, {}, {"n": 5, "x": 1.5, "b": True, "z": None, "l": [1, {"k": "v"}]},
                 {"event_id": "k-1", "text": "a \\ b / c \t"}]
_PINNED_ODD = [{"1": "index key", "a": 1}, {"big": 1e21, "small": 0.000001}, {"text": "re-run v1.0, ok", "l": ["1", "2"]}]
_PINNED_HASHES = [
    "4188f97406ea70d3fc4a674e9a647e5e1e4bb62d56c595fb4b13baf4cc37f37e",
    "ae7776c1ea351fcccbf335ae14aa76cc353adb791df1ac6c9ba7839735738e09",
    "de3a4fe7cf0414147ae4c9a4356f071bf972a7dcd030a3fc20be102b765e5f95",
    "a0050ce687d3be97f19767be219855a41ccd762aea4422c8cffc7352b67ba048",
    "3066283517f4a64d17a78f3e32247d9db0d477996817c66da72f14427e617b7f",
    "e63dd8d6e42d2045959d3ca89661d53a41b8667927b4fa2827fbafd8208bff5e",
    "6a80ac06cbd330305f87b89214df7a3c9394f4b945b0840dbf8c4634a0c7f59d",
    "e65f319ea7eb6a5149645963fc4916cfd89012709c2fed7cfdb10b585c039e48",
    "b1ed5b114d630292be0c1de15285006754f287f1d67cae039d797e3e80c04abc",
]


def test_appended_events_hash_as_they_did(monkeypatch, tmp_path):
    import eventstore.log.commit as commit
    from eventstore import EventStore
    from eventstore.audit.verify import verify

    counter = iter(range(256))  # salts 00..00, 01..01, ...: the random bytes new_salts() reads, made fixed
    monkeypatch.setattr(commit.os, "urandom", lambda size: b"".join(bytes([next(counter)]) * SALT_BYTES
                                                                     for _ in range(size // SALT_BYTES)))
    db = tmp_path / "pinned.db"
    with EventStore.open(db) as store:
        s = store.create_session("pinned")
        s.append_many([("user/message", p, 1764460800.5) for p in _PINNED_PLAIN])
        s.append_many([("user/message", p, 1764460801.5) for p in _PINNED_ODD])
        s.append("assistant/message", {"content": "one"}, ts=1764460802.5)
        hashes = [h for (h,) in store._backend._read("SELECT hash FROM events ORDER BY position")]
        assert hashes == _PINNED_HASHES
        assert verify(store._backend).ok
