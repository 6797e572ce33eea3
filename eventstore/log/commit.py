"""Salted commitments: what a salted event's hash covers, so that a redaction can remove a
field and the hash chain still proves every other field (docs/redaction.md).

A salted event has 16 random bytes ``salt``. Each top-level payload key ``k`` gets its own
salt ``s_k = SHA-256(salt + json(k))[:16]`` and digest ``d_k = SHA-256(s_k + json(v_k))``
(hex), ``json`` the canonical text (:func:`eventstore.log.codec.dumps`, UTF-8). The event's
*commit payload* is the payload with every value replaced by its digest; the chain hashes
the event's line built from it (:func:`eventstore.log.chain.chain_hash`). A redaction keeps
the digest of what it removes and the key salts of what it keeps: the removed value cannot
be recovered from a digest without its salt, and the kept ones still prove themselves.
"""

from __future__ import annotations

import hashlib
import os
import re
from itertools import chain, repeat
from typing import Any

import orjson as _orjson

from eventstore.log.codec import canonical_bytes, canonical_bytes_many, dumps, loads

__all__ = ["SALT_BYTES", "new_salts", "key_salt", "value_digest", "commit_payload", "commit_json",
           "commit_jsons", "rebuilt_commit_json", "is_event_salt", "key_salts_blob", "key_salts_of"]

SALT_BYTES = 16
_sha256 = hashlib.sha256


def new_salts(n: int) -> list[bytes]:
    """``n`` fresh random salts of :data:`SALT_BYTES` bytes each (one ``os.urandom`` call)."""
    blob = os.urandom(SALT_BYTES * n)
    return [blob[i:i + SALT_BYTES] for i in range(0, SALT_BYTES * n, SALT_BYTES)]


def _json_bytes(value: Any) -> bytes:
    """The canonical JSON text of ``value`` as UTF-8: orjson's when it is provably the same
    (:func:`eventstore.log.codec.canonical_bytes`), else :func:`dumps`'."""
    t = type(value)
    if t is str or t is bool or value is None or (t is int and -(2**53) < value < 2**53):
        try:
            return _orjson.dumps(value)
        except _orjson.JSONEncodeError:  # a lone surrogate: dumps escapes it as JavaScript does
            pass
        return dumps(value).encode("utf-8")
    return canonical_bytes(value)


def key_salt(salt: bytes, key: str) -> bytes:
    """The salt of payload key ``key`` (16 bytes) derived from an event's ``salt``."""
    return _sha256(salt + _json_bytes(key)).digest()[:SALT_BYTES]


def value_digest(key_salt_: bytes, value: Any) -> str:
    """The digest (64 hex digits) of one payload value under its key salt."""
    return _sha256(key_salt_ + _json_bytes(value)).hexdigest()


def commit_payload(salt: bytes, payload: dict) -> dict[str, str]:
    """The commit payload of a salted event: ``{key: digest}`` in the payload's key order.
    ``payload`` is the payload as stored (read back from its canonical text)."""
    sha = _sha256
    jb = _json_bytes
    return {k: sha(sha(salt + jb(k)).digest()[:SALT_BYTES] + jb(v)).hexdigest() for k, v in payload.items()}


def commit_json(salt: bytes, payload: dict) -> str:
    """The canonical JSON object text of :func:`commit_payload` (what goes into the event's
    line in place of its payload when the chain hashes a salted event)."""
    return dumps(commit_payload(salt, payload))


def commit_jsons(salts: list[bytes], payloads: list[dict]) -> list[str]:
    """:func:`commit_json` of each payload under its salt (the append path's batch form,
    same rule, same text).

    A batch whose keys and values orjson writes as :func:`dumps` does (most: see
    :func:`eventstore.log.codec.canonical_bytes_many`) is encoded by C loops over all of its
    keys and values at once, each commit object written by orjson; otherwise (a key that
    may read as an array index, which JavaScript puts first; a number orjson writes
    otherwise) each payload goes through :func:`_commit_jsons_each`, as does a batch of one
    (measured: 3 µs against 8 by the batch path, whose setup a single append does not repay)."""
    if len(salts) != len(payloads):
        raise ValueError("commit_jsons: as many salts as payloads are needed")
    if len(payloads) == 1:  # (one append: the batch path's setup costs more than it saves)
        return _commit_jsons_each(salts, payloads)
    out: list[str] = []
    for i in range(0, len(payloads), _SLICE):  # (a slice at a time: the C loops' lists are per key)
        some_salts, some = salts[i:i + _SLICE], payloads[i:i + _SLICE]
        fast = _commit_jsons_fast(some_salts, some)
        out += fast if fast is not None else _commit_jsons_each(some_salts, some)
    return out


#: Payloads encoded together by :func:`_commit_jsons_fast`: its lists hold every key and
#: value of a slice, so an import's batch of tens of thousands of events is taken in slices.
_SLICE = 512


def _commit_jsons_fast(salts: list[bytes], payloads: list[dict]) -> list[str] | None:
    """:func:`commit_jsons` by C loops over the whole batch, or None when a key or value
    needs :func:`dumps` (the caller then takes :func:`_commit_jsons_each`)."""
    try:
        keys = list(chain.from_iterable(payloads))
        if _INDEX_KEY("\x00" + "\x00".join(keys)) is not None:  # (a str key each, or TypeError)
            return None
        kbs = list(map(_orjson.dumps, keys))
    except (TypeError, _orjson.JSONEncodeError):  # a key that is not a str, a lone surrogate
        return None
    vbs = canonical_bytes_many(list(chain.from_iterable(map(dict.values, payloads))))
    if vbs is None:
        return None
    sha = _sha256
    key_event_salts = chain.from_iterable(map(repeat, salts, map(len, payloads)))
    digests = iter([sha(sha(salt + kb).digest()[:SALT_BYTES] + vb).hexdigest()
                    for salt, kb, vb in zip(key_event_salts, kbs, vbs, strict=True)])
    # each payload's keys with its own digests (zip takes the payload's keys first, so it
    # stops without taking one digest too many)
    return list(map(bytes.decode, map(_orjson.dumps, map(dict, map(zip, payloads, repeat(digests))))))


# a key that JavaScript may put first (an array index starts with a digit), in keys joined by NUL
_INDEX_KEY = re.compile("\x00[0-9]").search


def _commit_jsons_each(salts: list[bytes], payloads: list[dict]) -> list[str]:
    """:func:`commit_jsons` payload by payload, key by key: the object text is joined
    directly from each key's canonical JSON and its hex digest, unless a key reads as an
    array index (JavaScript puts those first, so :func:`dumps` orders them)."""
    sha = _sha256
    jb = _json_bytes
    out = []
    for salt, payload in zip(salts, payloads, strict=True):
        parts = []
        index_key = False
        for k, v in payload.items():
            kb = jb(k)
            index_key = index_key or kb[1:2].isdigit()
            parts.append(kb + b':"' + sha(sha(salt + kb).digest()[:SALT_BYTES] + jb(v)).hexdigest().encode() + b'"')
        # a key that may read as an array index: dumps puts it where JSON.stringify does
        out.append(commit_json(salt, payload) if index_key else (b"{" + b",".join(parts) + b"}").decode("utf-8"))
    return out


def is_event_salt(salt: bytes | None) -> bool:
    """Whether a stored ``salt`` is an event's own salt (:data:`SALT_BYTES` bytes), not the
    key salts a redaction left (:func:`key_salts_blob`, always longer) nor NULL."""
    return salt is not None and len(salt) == SALT_BYTES


def key_salts_blob(salts: dict[str, bytes]) -> bytes | None:
    """What a redacted event stores in its salt column: the salts of the keys it keeps, as
    the UTF-8 canonical JSON object ``{key: hex salt}`` (longer than :data:`SALT_BYTES`), or
    None when it keeps none. They stay with the content, so a later redaction of one of
    those keys removes its salt with it (docs/redaction.md)."""
    return dumps({k: v.hex() for k, v in salts.items()}).encode("utf-8") if salts else None


def key_salts_of(blob: bytes | None) -> dict[str, bytes]:
    """The key salts in a redacted event's salt column (:func:`key_salts_blob`); ``{}`` for
    NULL or an event salt. Raises ``ValueError`` for a blob no redaction wrote."""
    if blob is None or is_event_salt(blob):
        return {}
    salts = loads(bytes(blob).decode("utf-8"))
    if not isinstance(salts, dict):
        raise ValueError("the key salts are not a JSON object")
    return {k: bytes.fromhex(v) for k, v in salts.items()}


def rebuilt_commit_json(payload: dict, digests: dict[str, str], salts: dict[str, bytes]) -> str:
    """The commit payload text of a redacted event, rebuilt without its salt: each key of the
    stored ``payload`` takes its digest from ``digests`` (keys a redaction touched) or is
    digested again under its key salt from ``salts`` (keys it kept). Raises ``KeyError``
    for a key found in neither (the redaction records do not cover the event)."""
    out = {}
    for k, v in payload.items():
        out[k] = digests[k] if k in digests else value_digest(salts[k], v)
    return dumps(out)
