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
