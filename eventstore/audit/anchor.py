"""Log checkpoints: what the log held at one moment, written down to be kept elsewhere.

(Not to be confused with :mod:`eventstore.backends.sqlite.checkpoint`, which copies SQLite's
WAL into the database file.)

The hash chain proves that a session's events link up, but whoever can write the file can
recompute it after an edit, and cutting off a session's last events leaves a valid, shorter
chain. A *checkpoint* is a small JSON document (:func:`make_checkpoint`, ``eventstore
checkpoint``) holding the global position, each session's event count and head hash and a
hash of its ``sessions`` row, and one root hash over them; optionally signed with an
Ed25519 key. Kept somewhere the database's writers cannot reach (another machine, a ticket,
a transparency log), it lets :func:`check_checkpoint` (``eventstore verify --checkpoint``)
prove that the log still *extends* it: nothing the checkpoint covered was changed, removed
or cut off, and no chain was recomputed.

The document (format ``eventstore-checkpoint/1``)::

    {"format": "eventstore-checkpoint/1",
     "created_at": 1764460800.123,           # seconds since the epoch, taken before the read
     "created": "2025-11-30T00:00:00Z",      # the same, for people
     "position": 5015,                       # the largest events.position (0: empty log)
     "session_count": 2,
     "root": "<64 hex>",                     # Merkle tree hash over the sessions (below)
     "sessions": [{"id": "s-1", "events": 15, "head": "<64 hex>", "row": "<64 hex>"}, ...],
     "signature": {"algorithm": "ed25519", "public_key": "<64 hex>", "value": "<128 hex>"}}

* ``head`` is the stored hash of the session's last event (seq ``events - 1``), or the
  genesis hash for an empty session (see docs/schema.md, the hash chain).
* ``row`` = SHA-256 of ``{"created_at":C,"id":I,"meta":M}`` (Python ``json.dumps`` with
  ``sort_keys``, ``separators=(",", ":")``, ASCII escapes; ``M`` the stored meta text): the
  session row, which no event hash covers. It also covers ``sessions.meta_hash`` (a
  function of the same three values, :func:`eventstore.log.chain.session_hash`), so the leaf is
  unchanged by migration 0210 and checkpoints written before it verify as they did.
* ``root`` is the Merkle tree hash of RFC 6962 (section 2.1) over the sessions sorted by
  id (code point order): leaf = SHA-256(``0x00`` || ``json.dumps([id, events, head, row])``
  (ASCII escapes, ``separators=(",", ":")``)), node = SHA-256(``0x01`` || left || right),
  splitting ``n`` leaves at the largest power of two below ``n``; the root of no sessions is
  SHA-256 of nothing. A Merkle tree rather than one chain: one session's entry can be
  proved with log(n) hashes without showing the others.
* The signature is Ed25519 over ``b"eventstore-checkpoint/1\\n"`` followed by
  ``json.dumps({"created_at", "position", "root", "session_count"}, sort_keys=True,
  separators=(",", ":"))``: the root binds every session entry.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import time
from typing import Any

from eventstore.backends.capabilities import AuditReads
from eventstore.backends.fallbacks import capability
from eventstore.errors import CheckpointError
from eventstore.log.chain import genesis_hash

__all__ = ["CheckpointError", "check_checkpoint", "generate_key", "load_checkpoint", "make_checkpoint",
           "merkle_root", "session_row_hash", "write_checkpoint"]

FORMAT = "eventstore-checkpoint/1"
#: Seconds a session's ``created_at`` may precede the checkpoint although the session was
#: committed after the checkpoint's snapshot: ``create_session`` stamps the time, then waits
#: (up to its busy timeout) for the write lock.
CREATE_GRACE = 60.0


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def session_row_hash(session_id: str, created_at: float, meta: str) -> str:
    """SHA-256 (hex) of a ``sessions`` row, as a checkpoint records it."""
    return hashlib.sha256(_canonical({"created_at": created_at, "id": session_id, "meta": meta})).hexdigest()


def _leaf(entry: dict) -> bytes:
    return hashlib.sha256(b"\x00" + _canonical([entry["id"], entry["events"], entry["head"], entry["row"]])).digest()


def merkle_root(entries: list[dict]) -> str:
    """The RFC 6962 Merkle tree hash (hex) over checkpoint ``entries`` in the order given
    (``{"id", "events", "head", "row"}`` dicts, sorted by id in a checkpoint)."""
    level = [_leaf(e) for e in entries]
    if not level:
        return hashlib.sha256(b"").hexdigest()

    def mth(lo: int, hi: int) -> bytes:
        if hi - lo == 1:
            return level[lo]
        k = 1 << ((hi - lo - 1).bit_length() - 1)  # the largest power of two below hi - lo
        return hashlib.sha256(b"\x01" + mth(lo, lo + k) + mth(lo + k, hi)).digest()

    return mth(0, len(level)).hex()


def _signed_bytes(doc: dict) -> bytes:
    fields = {k: doc[k] for k in ("created_at", "position", "root", "session_count")}
    return FORMAT.encode() + b"\n" + _canonical(fields)


MAX_CHECKPOINT_BYTES = 256 << 20  # a checkpoint of about 1,000,000 sessions (~250 bytes each)
MAX_KEY_BYTES = 64 << 10  # a PEM key is a few hundred bytes


def _read_at_most(path: str | os.PathLike, limit: int, what: str) -> bytes:
    """The bytes of the file ``path``, read only up to ``limit`` (a device such as
    /dev/zero, or a wrong file, would otherwise be read into memory whole). Raises
    :class:`CheckpointError` past ``limit`` and ``OSError``."""
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise CheckpointError(f"{os.fspath(path)}: not {what}: it holds more than {_size(limit)}, "
                              f"the most {what} may hold")
    return data


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def _load_private_key(path: str | os.PathLike):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    data = _read_at_most(path, MAX_KEY_BYTES, "a key file")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as e:
        raise CheckpointError(f"{os.fspath(path)}: not an unencrypted PEM private key ({e})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise CheckpointError(f"{os.fspath(path)}: not an Ed25519 key ({type(key).__name__})")
    return key


def load_public_key(path: str | os.PathLike) -> str:
    """The Ed25519 public key (64 hex digits) in the PEM file ``path`` (public or private).
    Raises :class:`CheckpointError` and ``OSError``."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    data = _read_at_most(path, MAX_KEY_BYTES, "a key file")
    if b"PRIVATE KEY" in data:
        return _raw_public(_load_private_key(path).public_key())
    try:
        key = serialization.load_pem_public_key(data)
    except ValueError as e:
        raise CheckpointError(f"{os.fspath(path)}: not a PEM public key ({e})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise CheckpointError(f"{os.fspath(path)}: not an Ed25519 key ({type(key).__name__})")
    return _raw_public(key)


def _raw_public(key) -> str:
    from cryptography.hazmat.primitives import serialization

    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()


def generate_key(path: str | os.PathLike) -> tuple[str, str]:
    """Make an Ed25519 key pair: the private key as unencrypted PEM (PKCS#8) in ``path``
    (created with mode 0600; an existing file is never replaced) and the public key in
    ``path + ".pub"``. Returns ``(private path, public path)``. Raises ``OSError``
    (``FileExistsError`` if either file exists)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    priv_path, pub_path = os.fspath(path), os.fspath(path) + ".pub"
    if os.path.lexists(pub_path):
        raise FileExistsError(17, "file exists (a key is never replaced)", pub_path)
    fd = os.open(priv_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(private)
    with open(pub_path, "xb") as f:
        f.write(public)
    return priv_path, pub_path


# --- making a checkpoint ----------------------------------------------------------------------

def make_checkpoint(backend: AuditReads, key_path: str | os.PathLike | None = None) -> dict:
    """Read the log of ``backend`` in one snapshot (:meth:`AuditReads.checkpoint_rows`) and
    return its checkpoint document (see the module docstring); signed with the Ed25519
    private key in the PEM file ``key_path`` when given. Raises :class:`CheckpointError`
    for a bad key, :class:`DatabaseError` when the database cannot be read."""
    key = None if key_path is None else _load_private_key(key_path)
    created_at = time.time()  # before the snapshot: a session it does not see was stored later
    snap = capability(backend, AuditReads).checkpoint_rows()
    position = snap["position"]
    entries = [{"id": sid, "events": n, "head": genesis_hash(sid) if head is None else head,
                "row": session_row_hash(sid, created, meta)} for sid, created, meta, n, head in snap["sessions"]]
    entries.sort(key=lambda e: e["id"])
    doc = {"format": FORMAT, "created_at": created_at,
           "created": _dt.datetime.fromtimestamp(created_at, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
           "position": position, "session_count": len(entries), "root": merkle_root(entries),
           "sessions": entries}
    if key is not None:
        doc["signature"] = {"algorithm": "ed25519", "public_key": _raw_public(key.public_key()),
                            "value": key.sign(_signed_bytes(doc)).hex()}
    return doc


def write_checkpoint(doc: dict, dest) -> None:
    """Write ``doc`` as JSON (one line per session entry) to the binary file object ``dest``."""
    head = {k: v for k, v in doc.items() if k not in ("sessions", "signature")}
    out = [json.dumps(head, ensure_ascii=True)[:-1]]
    if "signature" in doc:
        out.append(', "signature": ' + json.dumps(doc["signature"]))
    out.append(', "sessions": [')
    out.append(",".join("\n  " + json.dumps(e, ensure_ascii=True) for e in doc["sessions"]))
    out.append("\n]}\n")
    dest.write("".join(out).encode("ascii"))


def load_checkpoint(path: str | os.PathLike) -> dict:
    """Read and check the shape of a checkpoint file. Raises ``OSError`` and
    :class:`CheckpointError` (larger than :data:`MAX_CHECKPOINT_BYTES`, not JSON, not a
    checkpoint, an entry of the wrong shape). Memory: the file's bytes and the parsed
    document."""
    name = os.fspath(path)
    data = _read_at_most(path, MAX_CHECKPOINT_BYTES, "a checkpoint")
    try:
        doc = json.loads(data)
    except RecursionError:
        raise CheckpointError(f"{name}: not a checkpoint (not JSON: nested too deeply)") from None
    except ValueError as e:
        raise CheckpointError(f"{name}: not a checkpoint (not JSON: {e})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CheckpointError(f"{name}: not a checkpoint (no \"format\": \"{FORMAT}\")")
    ok = (isinstance(doc.get("position"), int) and isinstance(doc.get("sessions"), list)
          and isinstance(doc.get("root"), str) and isinstance(doc.get("created_at"), (int, float))
          and isinstance(doc.get("session_count"), int))
    for e in doc.get("sessions") or ():
        ok = ok and isinstance(e, dict) and isinstance(e.get("id"), str) and isinstance(e.get("events"), int) \
            and isinstance(e.get("head"), str) and isinstance(e.get("row"), str)
    if not ok:
        raise CheckpointError(f"{name}: not a checkpoint (a field is missing or of the wrong type)")
    return doc


# --- checking the log against a checkpoint --------------------------------------------------

def check_checkpoint(backend: AuditReads, doc: dict, *, name: str = "checkpoint",
                     trusted_key: str | None = None) -> list[tuple[str | None, int | None, str]]:
    """Check that the log of ``backend`` extends the checkpoint ``doc``; return problems as
    ``(session id or None, seq or None, message)``, none when it does.

    First the document itself: its entries must hash to its root, a signature must verify,
    and with ``trusted_key`` (64 hex digits) it must be signed by that key. Then, in one
    snapshot of the log: each session it lists still has its ``sessions`` row unchanged, at
    least as many events, and at seq ``events - 1`` the head hash it recorded (with the
    chain verified from genesis by :func:`eventstore.audit.verify.verify`, every event up to the
    head is then the one checkpointed); the events at positions up to its ``position`` are
    exactly those it counted; and no session missing from it is dated before it (by more than :data:`CREATE_GRACE`).
    ``name`` labels the messages (the file name).
    """
    problems: list[tuple[str | None, int | None, str]] = []

    def add(sid: str | None, seq: int | None, message: str) -> None:
        problems.append((sid, seq, f"{name}: {message}"))

    entries = doc["sessions"]
    if merkle_root(entries) != doc["root"] or len(entries) != doc["session_count"]:
        add(None, None, "the document was altered: its session entries do not hash to its root")
        return problems
    sig = doc.get("signature")
    if sig is not None:
        try:
            from cryptography.exceptions import InvalidSignature
            from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

            Ed25519PublicKey.from_public_bytes(bytes.fromhex(sig["public_key"])).verify(
                bytes.fromhex(sig["value"]), _signed_bytes(doc))
        except (InvalidSignature, ValueError, KeyError, TypeError):
            add(None, None, "the signature does not verify: the document was altered after signing")
            return problems
    if trusted_key is not None:
        if sig is None:
            add(None, None, "it is not signed, but a public key to trust was given")
            return problems
        if sig.get("public_key") != trusted_key:
            add(None, None, f"it is signed by key {sig.get('public_key', '')[:16]}…, not by the trusted key "
                            f"{trusted_key[:16]}…")
            return problems
    position = doc["position"]
    backend = capability(backend, AuditReads)
    snap = backend.checkpoint_rows({e["id"]: e["events"] - 1 for e in entries if e["events"] > 0}, position)
    last = snap["position"]
    if last < position:
        add(None, None, f"the log ends at position {last}, before the checkpoint's position {position}: "
                        f"events were cut off")
    stored_sessions = {sid: (created, meta, n) for sid, created, meta, n, _head in snap["sessions"]}
    hidden = {r[0] for r in backend.imports()}  # importing rows: readers do not show these sessions
    counted = 0
    listed = set()
    for e in entries:
        sid, n = e["id"], e["events"]
        listed.add(sid)
        counted += n
        row = stored_sessions.get(sid)
        if row is None:
            add(sid, None, f"the session is gone (it had {n} events at the checkpoint)")
            continue
        if sid in hidden:
            add(sid, None, "the store does not show the session: an importing row hides it from every reader "
                           "(an import still running, or a row made to hide it)")
        if session_row_hash(sid, row[0], row[1]) != e["row"]:
            add(sid, None, "its sessions row (created_at or meta) changed since the checkpoint")
        now = row[2]
        if now < n:
            add(sid, now if now else None, f"cut off: {n} events at the checkpoint, {now} now")
            continue
        if n == 0:
            if e["head"] != genesis_hash(sid):
                add(sid, None, "its recorded genesis hash is not this session's")
            continue
        stored = snap["at"].get(sid)
        if stored is None or stored[0] != e["head"]:
            add(sid, n - 1, "the event at the checkpoint's head differs from the one checkpointed: "
                            "history was rewritten (the chain recomputed, or events replaced)")
        elif stored[1] > position:
            add(sid, n - 1, f"the checkpoint's head is now at position {stored[1]}, after the checkpoint's "
                            f"position {position}: the log was rewritten")
    if snap["counted"] != counted:
        add(None, None, f"{snap['counted']} events are stored at positions up to {position}, the checkpoint "
                        f"counted {counted}: events were added to, or moved in, the past")
    for sid, (created, _meta, _n) in sorted(stored_sessions.items()):
        if sid not in listed and isinstance(created, (int, float)) and created <= doc["created_at"] - CREATE_GRACE:
            add(sid, None, "the session is dated before the checkpoint but is not in it: it was added "
                           "later with a past date (or the checkpoint is of another database)")
    return problems
