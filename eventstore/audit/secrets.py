"""Finding secrets in stored events, and keeping them out of the store.

The detectors are Yelp's ``detect-secrets`` plugins (AWS keys, GitHub, GitLab, OpenAI, Slack,
Stripe, SendGrid and PyPI tokens, private keys, JSON Web Tokens, passwords in URLs), and, in
the same plugin form, the kinds it lacks (:class:`AnthropicKeyDetector`,
:class:`OpenAIProjectKeyDetector`, :class:`GitHubFineGrainedTokenDetector`,
:class:`GoogleApiKeyDetector`, :class:`AssignedSecretDetector` for a high-entropy value
assigned to a secret-sounding name). Each detector comes with its needles
(:data:`PLUGINS`): lower-case literals, one of which every text it can find a secret in holds.
A page of events is searched for every needle at once (:func:`candidates`), and only an event
that holds one is parsed and given to the detectors whose needles it holds.

A :class:`Finding` names the session, the seq (None for the session's meta), the field path
(``tool_calls[0].function.arguments``) and the kind, with a masked preview: a short prefix
of the secret at most, never the secret.

A secret streamed in pieces (``assistant/chunk`` deltas) is in no one event: each run of
chunks is also scanned with its deltas joined (:class:`ChunkRuns`), and every chunk holding a
piece of a secret is a finding (``delta.content``).

:class:`SecretFilter` is the write-time side (``EventStore.open(..., redact_secrets=True)``,
``eventstore import --redact-secrets``): each secret-bearing field is stored as the marker
``[redacted: secret: KIND]``, and a ``redaction`` event right after the event says so.
"""

from __future__ import annotations

import getpass
import json
import math
import os
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.stripe import StripeDetector

# a path's text (``tool_calls[0].function.arguments``, ``env["GITHUB.TOKEN"]``): the one that
# ``redact --path`` reads back (eventstore.log.redaction.parse_path)
from eventstore.log.redaction import path_text

__all__ = ["ChunkRuns", "Finding", "NEEDLES", "PLUGINS", "SecretFilter", "candidates", "chunk_secrets", "kinds",
           "mask", "path_text", "scan_payload", "scan_payload_json", "scan_store", "secrets_in"]

REDACTION = "redaction"  # the type of the event that records a redaction (docs/redaction.md)
#: The redaction event's key naming the redacted event's seq. (The design's "seq" cannot be a
#: payload key: type, seq and ts are the line's own, refused in a payload.)
TARGET_SEQ = "event_seq"


class WholeMatch:
    """For a detect-secrets plugin whose pattern captures only a token's prefix (``ghp``,
    ``glpat``): yields each whole match instead."""

    denylist: Iterable[re.Pattern]

    def analyze_string(self, string: str) -> Iterator[str]:
        for regex in self.denylist:
            for m in regex.finditer(string):
                yield m.group(0)


class GitHubTokenFullDetector(WholeMatch, GitHubTokenDetector):
    """detect-secrets' GitHub plugin (``ghp_``, ``gho_``, ... tokens), each whole token."""


class GitLabTokenFullDetector(WholeMatch, GitLabTokenDetector):
    """detect-secrets' GitLab plugin, each whole token."""


class ArmoredPrivateKeyDetector(PrivateKeyDetector):
    """detect-secrets' private key plugin, holding out for a key itself: the armour line
    (``-----BEGIN RSA PRIVATE KEY-----``) followed by key material, not the words alone (code
    or text that talks about keys)."""

    denylist = [re.compile(r"-----(BEGIN[A-Z0-9 ]{0,20} PRIVATE KEY(?: BLOCK)?)-----\s*(?:[A-Za-z-]+:[^\n]*\n)*"
                           r"\s*[A-Za-z0-9+/=]{20}"),
                re.compile(r"(PuTTY-User-Key-File-\d): ")]


class AnthropicKeyDetector(RegexBasedDetector):
    """Anthropic API and admin keys (``sk-ant-api03-...``, ``sk-ant-admin01-...``)."""

    secret_type = "Anthropic API Key"
    denylist = [re.compile(r"sk-ant-[a-z]{2,8}\d{0,3}-[A-Za-z0-9_-]{32,}")]


class OpenAIProjectKeyDetector(RegexBasedDetector):
    """OpenAI's newer keys (project, service account, admin), which detect-secrets' OpenAI
    plugin (the older ``sk-...T3BlbkFJ...`` form) misses when the marker is not where it expects."""

    secret_type = "OpenAI Token"
    denylist = [re.compile(r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,}")]


class GitHubFineGrainedTokenDetector(RegexBasedDetector):
    """GitHub's fine-grained personal access tokens (``github_pat_...``)."""

    secret_type = "GitHub Token"
    denylist = [re.compile(r"github_pat_[A-Za-z0-9_]{60,}")]


class GoogleApiKeyDetector(RegexBasedDetector):
    """Google Cloud / Gemini API keys (``AIza`` and 35 more characters)."""

    secret_type = "Google API Key"
    denylist = [re.compile(r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{35}(?![A-Za-z0-9_-])")]


#: Passwords that documentation and examples use in URLs (``scott:tiger@``): not a secret.
PLACEHOLDER_PASSWORDS = frozenset(
    "password passwd pass pwd pw secret tiger changeme example test testing foo bar baz xxx xxxx xxxxx "
    "mypassword yourpassword my-password your-password mysecretpassword secretpassword redacted".split())
_TEMPLATE = re.compile(r"^(?:<[^>]*>|\{[^}]*\}|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|%[sd]|%\([a-z_]+\)s|\*+|x+|\.\.\.|…)$",
                       re.I)


class BasicAuthUrlDetector(BasicAuthDetector):
    """detect-secrets' plugin for a password in a URL (``scheme://user:password@host``),
    passing over placeholders: a template (``{password}``, ``<password>``, ``$PASS``), stars,
    a word the documentation of databases uses (``scott:tiger``, ``user:pass``), one or two
    characters (``u:p@``)."""

    def analyze_string(self, string: str) -> Iterator[str]:
        for value in super().analyze_string(string):
            if len(value) > 2 and value.lower() not in PLACEHOLDER_PASSWORDS and not _TEMPLATE.match(value):
                yield value


#: Names of a variable, key or option that holds a secret (``API_KEY=``, ``"client_secret":``, ``--password ``),
#: from the secret word on (``OPENAI_API_KEY`` matches from ``API``): a leading part of the name
#: would make the expression try every position of a text.
SECRET_NAME = (r"(?:api[_-]?key|apikey|secret(?:[_-]?(?:access[_-]?)?key)?|access[_-]?key"
               r"|private[_-]?key|auth[_-]?token|access[_-]?token|refresh[_-]?token|bearer[_-]?token|token"
               r"|passw(?:or)?d|pwd|credentials?)(?:[_.-][A-Za-z0-9]+)*")


class AssignedSecretDetector(RegexBasedDetector):
    """A high-entropy value assigned to a secret-sounding name: ``OPENAI_API_KEY=...``,
    ``"client_secret": "..."``, ``password: ...``, ``Authorization: Bearer ...`` (in code,
    an ``.env`` file, a config, a command line). The value must look random (Shannon entropy
    of at least :attr:`ENTROPY` bits a character over 16 characters or more, letters and
    digits both): a placeholder, a variable or a word is passed over."""

    secret_type = "Secret Assignment"
    ENTROPY = 3.5
    denylist = [re.compile(
        r"(?<![A-Za-z0-9])(?P<name>" + SECRET_NAME + ")"  # (the name from its secret word on: see SECRET_NAME)
        + r"""['"\]]{0,2}\s{0,3}(?:=|:=|:|=>|\s)\s{0,3}(?:["'`]|Bearer\s+|Token\s+)?"""
        r"(?P<value>[A-Za-z0-9+/=_.~-]{16,})(?![A-Za-z0-9+/=_.~(-])", re.IGNORECASE),
        re.compile(r"(?i)\b(?P<name>Authorization):?\s{0,3}(?:Bearer|Basic|Token)\s+(?P<value>[A-Za-z0-9+/=_.~-]{16,})")]
    #: A name ending so holds something about a secret, not the secret (``token_hash``, ``key_id``).
    NOT_SECRET = re.compile(r"[_.-](?:hash|hashes|id|ids|sha|sha1|sha256|digest|checksum|fingerprint|count|len|length"
                            r"|type|name|names|file|path|url|uri|prefix|version|expiry|expires|ttl)$", re.IGNORECASE)

    #: The same expressions without IGNORECASE, for lower-cased ASCII text: an expression that
    #: ignores case gets no quick skip to its first characters, and is many times slower.
    #: (Nor a look-behind first: it is checked in :meth:`analyze_string`.)
    LOWER = [re.compile(r.pattern.replace("(?i)", "").replace("(?<![A-Za-z0-9])", "").replace("Bearer", "bearer")
                        .replace("Basic", "basic").replace("Token", "token").replace("Authorization", "authorization"))
             for r in denylist]

    def analyze_string(self, string: str) -> Iterator[str]:
        ascii_ = string.isascii()  # (then lower() keeps every offset)
        if not ascii_:
            yield from self._values(string, string, self.denylist)
            return
        text = string.lower()
        for regex in self.LOWER:
            at = 0
            while (m := regex.search(text, at)) is not None:
                at = m.start() + 1
                if m.start() and text[m.start() - 1].isalnum():  # inside a longer word: look on from there
                    continue
                at = m.end()
                yield from self._values(string, text, (), m)

    def _values(self, string: str, text: str, regexes, one: re.Match | None = None) -> Iterator[str]:
        """The values of ``one`` (or of every match of ``regexes`` in ``text``) that are secrets."""
        for m in [one] if one is not None else [m for r in regexes for m in r.finditer(text)]:
            value = string[m.start("value"):m.end("value")]
            if not self.NOT_SECRET.search(m.group("name")) and _looks_random(value, self.ENTROPY):
                yield value


_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+$")
_WORD = re.compile(r"[A-Z][a-z]{2,}|[a-z]{3,}|(?<![A-Za-z0-9])[A-Z]{3,}(?![A-Za-z0-9])")


def _looks_random(value: str, limit: float) -> bool:
    """Whether ``value`` reads as a generated secret: letters and digits mixed, Shannon
    entropy of at least ``limit`` bits a character, not a path or a dotted name."""
    if not (any(c.isdigit() for c in value) and any(c.isalpha() for c in value)):
        return False
    if value.count("/") > 2 or value.count(".") > 2:  # a path, a URL, a dotted name
        return False
    if sum(map(len, _WORD.findall(value))) * 2 >= len(value):  # made of words: a name, not a key
        return False
    if _DOTTED.match(value):  # module.Class, self.attribute: code
        return False
    n = len(value)
    entropy = -sum(c / n * math.log2(c / n) for c in map(value.count, set(value)))
    return entropy >= limit


@dataclass(frozen=True, slots=True)
class Plugin:
    """A detector and its needles: lower-case literals, one of which every text it finds a
    secret in holds (ignoring case). The detector runs only on a text that holds one."""

    detector: RegexBasedDetector
    needles: tuple[str, ...]

    @property
    def kind(self) -> str:
        """What a finding of this detector is called (the plugin's ``secret_type``)."""
        return self.detector.secret_type


GENERIC = AssignedSecretDetector.secret_type  # the kind a specific detector's finding takes precedence over

#: Every detector, with its needles: the kinds ``eventstore scan`` finds.
PLUGINS: tuple[Plugin, ...] = (
    Plugin(AWSKeyDetector(), ("akia", "asia", "abia", "acca", "a3t", "aws")),
    Plugin(GitHubTokenFullDetector(), ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    Plugin(GitHubFineGrainedTokenDetector(), ("github_pat_",)),
    Plugin(GitLabTokenFullDetector(), ("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "gr1348941", "glcbt-",
                                       "glimt-", "glptt-", "glagent-", "gloas-")),
    Plugin(OpenAIDetector(), ("t3blbkfj",)),
    Plugin(OpenAIProjectKeyDetector(), ("sk-proj-", "sk-svcacct-", "sk-admin-")),
    Plugin(AnthropicKeyDetector(), ("sk-ant-",)),
    Plugin(SlackDetector(), ("xox", "hooks.slack.com")),
    Plugin(StripeDetector(), ("k_live_",)),
    Plugin(SendGridDetector(), ("sg.",)),
    Plugin(PypiTokenDetector(), ("pypi-age",)),
    Plugin(GoogleApiKeyDetector(), ("aiza",)),
    Plugin(ArmoredPrivateKeyDetector(), ("private key", "putty-user-key-file")),
    Plugin(JwtTokenDetector(), ("eyj",)),
    Plugin(BasicAuthUrlDetector(), ("://",)),
    Plugin(AssignedSecretDetector(), ("key", "secret", "token", "passw", "pwd", "credential", "authoriz")),
)

#: Each needle and the plugins (indices in :data:`PLUGINS`) it lets run.
NEEDLES: dict[str, tuple[int, ...]] = {}
for _i, _p in enumerate(PLUGINS):
    for _n in _p.needles:
        NEEDLES[_n] = (*NEEDLES.get(_n, ()), _i)


def _probes() -> list[tuple[Any, str | None, list[str]]]:
    """How :func:`candidates` looks for the needles: a plain substring search for a needle
    alone, one expression for the needles that share a first character (``akia|asia|aws``:
    the expression engine skips to that character, where one search per needle would pass
    over the text once each)."""
    by_first: dict[str, list[str]] = {}
    for needle in NEEDLES:
        by_first.setdefault(needle[0], []).append(needle)
    out: list[tuple[Any, str | None, list[str]]] = []
    for group in by_first.values():
        if len(group) == 1:
            out.append((None, group[0], group))
        else:
            out.append((re.compile("|".join(map(re.escape, sorted(group, key=len, reverse=True)))), None, group))
    return out


_PROBES = _probes()
del _i, _p, _n


def _plugins_for(low: str) -> set[int]:
    """The plugins whose needles the lower-cased text ``low`` holds."""
    out: set[int] = set()
    for rx, needle, group in _PROBES:
        if rx is None:
            if needle in low:
                out.update(NEEDLES[needle])
        elif rx.search(low) is not None:
            for n in group:
                if n in low:
                    out.update(NEEDLES[n])
    return out


def candidates(texts: list[str]) -> list[int]:
    """The indices of ``texts`` that hold a needle (in order): the only ones a detector can
    find a secret in. One search per needle over the whole batch (lower-cased, joined), so the
    cost per text of a batch without secrets is a few passes of C over its characters (see
    :func:`_probes`)."""
    lows = [t.lower() for t in texts]
    big = "\x00".join(lows)  # (no needle holds NUL, and JSON text holds none unescaped)
    starts: list[int] | None = None
    end = len(big)
    hit: set[int] = set()
    for rx, needle, _group in _PROBES:
        at = big.find(needle) if rx is None else (m.start() if (m := rx.search(big)) else -1)
        if at == -1:
            continue
        if starts is None:
            starts = []
            pos = 0
            for low in lows:
                starts.append(pos)
                pos += len(low) + 1
        while at != -1:
            i = bisect_right(starts, at) - 1
            hit.add(i)
            nxt = starts[i + 1] if i + 1 < len(starts) else end  # on from the next text
            at = big.find(needle, nxt) if rx is None else (m.start() if (m := rx.search(big, nxt)) else -1)
    return sorted(hit)


def kinds() -> list[str]:
    """Every kind of secret the scanner finds, in the order of :data:`PLUGINS`."""
    return list(dict.fromkeys(p.kind for p in PLUGINS))


def mask(secret: str) -> str:
    """What a report shows of ``secret``: at most its first 4 characters (a quarter of a short
    one), then ``…`` and its length; never enough to use or guess it."""
    n = min(4, len(secret) // 4)
    return f"{secret[:n]}…({len(secret)} chars)"


def secrets_in(text: str) -> list[tuple[str, str]]:
    """``(kind, secret)`` of every secret found in ``text``, each once, in the order of :data:`PLUGINS`."""
    hit = _plugins_for(text.lower())
    if not hit:
        return []
    out: dict[tuple[str, str], None] = {}
    for i, plugin in enumerate(PLUGINS):
        if i in hit:
            for secret in plugin.detector.analyze_string(text):
                if secret:
                    out[plugin.kind, secret] = None
    if len(out) > 1:  # a generic finding of a secret a specific detector names is the same secret
        named = [s for k, s in out if k != GENERIC]
        return [(k, s) for k, s in out if k != GENERIC or not any(s in n or n in s for n in named)]
    return list(out)


Path = tuple  # a field path: keys and list indices from the payload's root


def _strings(value: Any, path: tuple) -> Iterator[tuple[tuple, str]]:
    """Every string inside ``value`` with its path."""
    if type(value) is str:
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _strings(v, (*path, i))


def scan_payload(payload: dict) -> list[tuple[Path, str, str]]:
    """``(path, kind, secret)`` of every secret in the string values of ``payload`` (content,
    tool call arguments, tool results, nested parts: a JSON text inside a string is scanned as
    text); a value with two secrets of one kind is named once."""
    out = []
    for path, s in _strings(payload, ()):
        seen = set()
        for kind, secret in secrets_in(s):
            if kind not in seen:
                seen.add(kind)
                out.append((path, kind, secret))
    return out


def scan_payload_json(text: str) -> list[tuple[Path, str, str]]:
    """:func:`scan_payload` of a payload's JSON text; a text that holds no needle is passed
    unparsed."""
    if not _plugins_for(text.lower()):
        return []
    return scan_payload(json.loads(text))


# --- streamed chunks -----------------------------------------------------------------------

#: The event type of a streamed increment of an assistant message (``{"delta": {"content": ...}}``).
CHUNK = "assistant/chunk"
#: The event types that end a run of chunks: the message they stream, or a new step or turn
#: (the same runs verify checks against their message).
RUN_ENDS = frozenset({"assistant/message", "step/start", "turn/start"})


class ChunkRuns:
    """The runs of ``assistant/chunk`` events of one session, read in order, and the secrets
    their deltas hold joined: a key streamed in 8-character pieces is in no one chunk.

    Every string in a chunk's ``delta`` (``content``; any other text a chunk carries, such as
    reasoning or tool call argument deltas) is joined with the same path's strings of the
    run's other chunks. :meth:`feed` takes each event; when a run ends (its message, a new
    step or turn; :meth:`close` at the end of what is read) it returns ``(key, path, kind,
    secret)`` for every chunk whose piece overlaps a secret of the joined text, ``key`` being
    what the caller passed (a seq, an index), ``path`` the piece's (``("delta", "content")``)."""

    __slots__ = ("pieces",)

    def __init__(self):
        self.pieces: dict[Path, list[tuple[Any, str]]] = {}  # path -> [(key, piece)] in order

    @property
    def open(self) -> bool:
        """Whether a run has chunks not yet looked at."""
        return bool(self.pieces)

    def feed(self, key: Any, type_: str, payload: Any) -> list[tuple[Any, Path, str, str]]:
        """Take the next event (``payload`` a dict or its JSON text); the findings of the run it
        ends, if it ends one."""
        if type_ == CHUNK:
            if isinstance(payload, (str, bytes)):
                try:
                    payload = json.loads(payload)
                except ValueError:
                    return []
            delta = payload.get("delta") if isinstance(payload, dict) else None
            if isinstance(delta, dict):
                for path, piece in _strings(delta, ("delta",)):
                    self.pieces.setdefault(path, []).append((key, piece))
            return []
        return self.close() if type_ in RUN_ENDS else []

    def close(self) -> list[tuple[Any, Path, str, str]]:
        """The findings of the run read so far, which ends here."""
        out: dict[tuple, tuple] = {}
        for path, pieces in self.pieces.items():
            if len(pieces) < 2:  # one piece is scanned with its own event
                continue
            joined = "".join(p for _k, p in pieces)
            found = secrets_in(joined)
            if not found:
                continue
            starts, at = [], 0
            for _k, p in pieces:
                starts.append(at)
                at += len(p)
            for kind, secret in found:
                pos = joined.find(secret)
                while pos != -1 and secret:
                    end = pos + len(secret)
                    i = bisect_right(starts, pos) - 1  # the piece the secret starts in, then each one it reaches
                    while i < len(pieces) and starts[i] < end:
                        if pieces[i][1]:
                            out.setdefault((pieces[i][0], path, kind), (pieces[i][0], path, kind, secret))
                        i += 1
                    pos = joined.find(secret, end)
        self.pieces = {}
        return list(out.values())


def chunk_secrets(types: list[str], texts: list[str]) -> dict[int, list[tuple[Path, str, str]]]:
    """For a batch of events (``types``, payload JSON ``texts``): index -> ``(path, kind,
    secret)`` of each chunk whose delta overlaps a secret streamed across chunks of the batch
    (:class:`ChunkRuns`; a run still open at the batch's end is looked at as it is)."""
    runs = ChunkRuns()
    found: list = []
    for i, (type_, text) in enumerate(zip(types, texts, strict=True)):
        if type_ == CHUNK or (runs.open and type_ in RUN_ENDS):
            found += runs.feed(i, type_, text)
    found += runs.close()
    out: dict[int, list] = {}
    for i, path, kind, secret in found:
        out.setdefault(i, []).append((path, kind, secret))
    return out


@dataclass(frozen=True, slots=True)
class Finding:
    """A secret found in a stored event (``seq``) or in a session's meta (``seq`` None): its
    field ``path`` (a tuple of keys and indices; :attr:`field` its text), its ``kind`` and a
    masked ``preview`` (:func:`mask`). The secret itself is not kept."""

    session_id: str
    seq: int | None
    path: Path
    kind: str
    preview: str

    @property
    def field(self) -> str:
        """The path as text: ``tool_calls[0].function.arguments``."""
        return path_text(self.path)

    def to_dict(self) -> dict:
        """The finding as ``scan --json`` writes it."""
        return {"session_id": self.session_id, "seq": self.seq, "path": self.field, "kind": self.kind,
                "preview": self.preview}


PAGE_EVENTS = 5000  # events read per page of a session
PAGE_BYTES = 8 << 20  # about this many bytes of payload per page


def scan_store(store, session_ids: Iterable[str] | None = None,
               progress: Callable[[int], None] | None = None) -> Iterator[Finding]:
    """Every secret in the stored sessions ``session_ids`` (all when None), session by session,
    the meta first, then the events in seq order; ``progress(events)`` after each page.
    Reads through the store's public reads. Raises :class:`~eventstore.errors.SessionNotFound`
    for a session that is not stored."""
    from eventstore.errors import SessionNotFound

    ids = [s.id for s in store.sessions()] if session_ids is None else list(session_ids)
    for sid in ids:
        meta = store.session_meta_json(sid)
        if meta is None:
            raise SessionNotFound(sid)
        for path, kind, secret in scan_payload_json(meta):
            yield Finding(sid, None, path, kind, mask(secret))
        after = -1
        runs = ChunkRuns()
        held: list[Finding] = []  # while a run of chunks is open: its secrets are known when it ends
        while True:
            rows = store.export_rows(sid, after, PAGE_EVENTS, PAGE_BYTES)
            if not rows:
                break
            texts = [pj.decode("utf-8") if type(pj) is bytes else pj for _type, _seq, _ts, pj in rows]
            hits = {i: scan_payload(json.loads(texts[i])) for i in candidates(texts)}
            for i, (type_, seq, _ts, _pj) in enumerate(rows):
                if type_ == CHUNK or (runs.open and type_ in RUN_ENDS):
                    _add_run(held, sid, runs.feed(seq, type_, texts[i]))
                held += [Finding(sid, seq, path, kind, mask(secret)) for path, kind, secret in hits.get(i, ())]
                if held and not runs.open:
                    held.sort(key=lambda f: f.seq)  # (stable: each event's findings in their order)
                    yield from held
                    held = []
            after = rows[-1][1]
            if progress is not None:
                progress(len(rows))
        _add_run(held, sid, runs.close())
        held.sort(key=lambda f: f.seq)
        yield from held


def _add_run(held: list[Finding], sid: str, found: list[tuple[Any, Path, str, str]]) -> None:
    """Add the findings of a run of chunks to ``held``, but for a secret a chunk holds whole
    (found with its event already)."""
    seen = {(f.seq, f.path, f.kind) for f in held}
    held += [Finding(sid, seq, path, kind, mask(secret)) for seq, path, kind, secret in found
             if (seq, path, kind) not in seen]


# --- write time ----------------------------------------------------------------------------

def marker(kind: str) -> str:
    """What a secret-bearing field holds once stored: ``[redacted: secret: KIND]``."""
    return f"[redacted: secret: {kind}]"


def redactor_name() -> str:
    """Who redacts at write time: the OS user (``by`` of the redaction event)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        return str(os.getuid()) if hasattr(os, "getuid") else "unknown"


def _set(payload: Any, path: Path, value: Any) -> Any:
    """``payload`` with the value at ``path`` replaced by ``value`` (copies along the path)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if isinstance(payload, dict):
        return {**payload, head: _set(payload[head], rest, value)}
    out = list(payload)
    out[head] = _set(out[head], rest, value)
    return out


def redacted(payload: dict, streamed: Iterable[tuple[Path, str, str]] = ()) -> tuple[dict, list[Path], str] | None:
    """``(payload with each secret-bearing field replaced by its marker, the paths replaced,
    the reason)``, or None when ``payload`` holds no secret. The reason is ``secret: KIND``
    (the kinds in order, comma-separated, when a payload holds several). ``streamed``: more
    ``(path, kind, secret)`` to redact, the pieces of a secret streamed across chunks
    (:func:`chunk_secrets`)."""
    found = scan_payload(payload)
    found += [f for f in streamed if (f[0], f[1]) not in {(p, k) for p, k, _s in found}]
    if not found:
        return None
    by_path: dict[Path, list[str]] = {}
    for path, kind, _secret in found:
        by_path.setdefault(path, []).append(kind)
    for path, ks in by_path.items():
        payload = _set(payload, path, marker(", ".join(dict.fromkeys(ks))))
    reason = "secret: " + ", ".join(dict.fromkeys(k for _p, k, _s in found))
    return payload, list(by_path), reason


class SecretFilter:
    """Redaction before storing: turns events into what is stored when their secrets must not
    land (the store's append path and the JSONL importer call it on each batch)."""

    def __init__(self, by: str | None = None):
        self.by = by or redactor_name()

    def redaction_payload(self, seq: int, paths: list[Path], reason: str) -> dict:
        """The payload of the ``redaction`` event of a field redacted before storing."""
        return {TARGET_SEQ: seq, "paths": [list(p) for p in paths], "reason": reason, "by": self.by,
                "before_storing": True}

    def meta_json(self, meta_json: str) -> str:
        """A session's meta JSON text as stored: each secret-bearing value replaced by its
        marker (the meta is no event: no redaction event records it)."""
        from eventstore.log.codec import dumps

        r = redacted(json.loads(meta_json)) if candidates([meta_json]) else None
        return meta_json if r is None else dumps(r[0])

    def events(self, first_seq: int, types: list[str], tss: list[float], payload_texts: list[str]
               ) -> tuple[list[str], list[float], list[str]] | None:
        """The batch of events ``(types, tss, payload JSON texts)`` that will get seqs
        ``first_seq``, ``first_seq + 1``, ... as stored: each event with a secret is followed by
        its ``redaction`` event (same ts) and holds markers in place of its secret-bearing
        fields. None when no event holds a secret (the batch is stored as it is)."""
        from eventstore.log.codec import dumps

        streamed = chunk_secrets(types, payload_texts)
        hit = set(candidates(payload_texts)) | set(streamed)
        if not hit:
            return None
        out_types: list[str] = []
        out_tss: list[float] = []
        out_texts: list[str] = []
        changed = False
        for i, (type_, ts, text) in enumerate(zip(types, tss, payload_texts, strict=True)):
            r = redacted(json.loads(text), streamed.get(i, ())) if i in hit else None
            seq = first_seq + len(out_types)
            if r is None:
                out_types.append(type_)
                out_tss.append(ts)
                out_texts.append(text)
                continue
            changed = True
            payload, paths, reason = r
            out_types += (type_, REDACTION)
            out_tss += (ts, ts)
            out_texts += (dumps(payload), dumps(self.redaction_payload(seq, paths, reason)))
        return (out_types, out_tss, out_texts) if changed else None


class RowRedactor:
    """The importer's side of :class:`SecretFilter`: rewrites a session's file rows ``(seq,
    type, ts, payload, hash)`` batch by batch as they are to be stored. An event with a secret
    gets its markers and is followed by its ``redaction`` event (same ts, same line of the
    file); every later row moves one seq on per redaction before it and is chained again.
    The rewriting is a function of the file alone, so a file imported twice gives the same
    rows (a stored session compares equal). ``start`` is ``(seq, hash before it)`` of the
    first row, as :func:`eventstore.io.bulk.import_jsonl`'s ``continues`` says (default: seq
    0 of ``session_id``, its genesis hash)."""

    def __init__(self, secrets: SecretFilter, session_id: str, start: tuple[int, str] | None = None):
        from eventstore.log.chain import genesis_hash

        self.secrets = secrets
        self.shift = 0  # redaction events inserted before the next row
        self.prev = start[1] if start is not None else genesis_hash(session_id)  # the hash of the row before

    def meta_json(self, meta_json: str) -> str:
        """:meth:`SecretFilter.meta_json`."""
        return self.secrets.meta_json(meta_json)

    def rows(self, rows: list[tuple], lines: list[int], offsets: list[int]) -> tuple[list, list, list]:
        """``(rows, lines, offsets)`` of a batch as stored (the same lists when nothing changes)."""
        from eventstore.log.chain import chain_hash
        from eventstore.log.codec import dumps
        from eventstore.log.line import event_line

        if not rows:
            return rows, lines, offsets
        texts = [r[3].decode("utf-8") if type(r[3]) is bytes else r[3] for r in rows]
        streamed = chunk_secrets([r[1] for r in rows], texts)
        hit = set(candidates(texts)) | set(streamed)
        if not hit and not self.shift:
            last = rows[-1][4]
            self.prev = last.decode() if type(last) is bytes else last
            return rows, lines, offsets
        out, out_lines, out_offsets = [], [], []
        prev = self.prev
        for i, (seq, type_, ts, payload, hash_) in enumerate(rows):
            r = redacted(json.loads(texts[i]), streamed.get(i, ())) if i in hit else None
            binary = type(payload) is bytes
            if r is None and not self.shift:  # before the first secret: as read
                out.append((seq, type_, ts, payload, hash_))
                prev = hash_.decode() if type(hash_) is bytes else hash_
                out_lines.append(lines[i])
                out_offsets.append(offsets[i])
                continue
            new = [(type_, texts[i] if r is None else dumps(r[0]))]
            if r is not None:
                new.append((REDACTION, dumps(self.secrets.redaction_payload(seq + self.shift, r[1], r[2]))))
            for k, (t, text) in enumerate(new):
                s = seq + self.shift + k  # the event, then its redaction event
                prev = chain_hash(prev, event_line(t, s, float(ts), text))
                out.append((s, t, ts, text.encode() if binary else text, prev.encode() if binary else prev))
                out_lines.append(lines[i])
                out_offsets.append(offsets[i])
            self.shift += len(new) - 1
        self.prev = prev
        return out, out_lines, out_offsets
