"""A search query's words and tokens, as the indexes match them: shared by the backends'
search (SQLite FTS5, PostgreSQL ``tsquery``, the scanning fallback) and by
:mod:`eventstore.search` (snippets). Below the backends: it imports nothing of the project
but :mod:`eventstore.lazy` (its patterns are compiled at first use, not at start-up).
"""

from __future__ import annotations

from eventstore.lazy import LazyPattern

__all__ = ["TOKEN", "WORD", "query_terms", "query_words"]

WORD = LazyPattern(r"\S+")  # what separates a query's words: whitespace
TOKEN = LazyPattern(r"[^\W_]+")  # what FTS5's unicode61 tokenizer takes as a token (letters, digits)
_FTS_OPERATORS = {"and", "or", "not", "near"}


def query_words(text: str) -> list[tuple[str, bool]]:
    """A user's query as ``(word, is a prefix)`` pairs: whitespace separates words; a word
    ending in ``*`` (and more than ``*``) matches as a prefix, written without the star."""
    out = []
    for w in WORD.findall(text):
        prefix = w.endswith("*") and len(w) > 1
        out.append((w.rstrip("*") if prefix else w, prefix))
    return out


def query_terms(query: str, raw: bool) -> list[tuple[str, bool]]:
    """The query's tokens as ``(lower-case token, is a prefix)``, as the index matches them
    (letters and digits; a raw query's upper-case operators AND, OR, NOT, NEAR left out)."""
    out = []
    for w in WORD.findall(query):
        prefix = w.endswith("*")
        tokens = [t.lower() for t in TOKEN.findall(w)]
        if raw and len(tokens) == 1 and tokens[0] in _FTS_OPERATORS and w.isupper():
            continue
        out += [(t, prefix and k == len(tokens) - 1) for k, t in enumerate(tokens)]
    return out
