"""Read commands run without click: the command lines of :data:`PLAIN` commands that leave
click nothing to decide (``eventstore --db P search Q --limit 5``: ``sessions``, ``search``,
``events``, ``messages``) are parsed here, from a declaration of each command's options,
and the command's own click-free body is run, so that these commands start without click's
import (docs/benchmarks.md). Anything else (``--help``, an unknown or repeated option, a
value click would refuse, an error before the output) is left to click, which parses the
command line again and says what is wrong: both paths print the same
(tests/cli/test_cli_formats.py holds them equal, and each declaration equal to its click
command's parameters)."""

from __future__ import annotations

import os
import sys

from . import utf8_text

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (eventstore's start-up)
if TYPE_CHECKING:
    from collections.abc import Callable

#: The choices of the global ``--durability`` (cli/group.py), as click takes them.
DURABILITIES = ("normal", "full", "may-lose-recent")

#: The kinds of option value: ``flag`` (no value, True when given), ``text`` (a UTF-8
#: word: :func:`eventstore.cli.utf8_text`), ``texts`` (the same, repeatable: a tuple),
#: ``count`` (a whole number >= 1) and ``int`` (a whole number >= 0), each in ASCII digits.
FLAG, TEXT, TEXTS, COUNT, INT = "flag", "text", "texts", "count", "int"


class Plain:
    """A command the fast path runs: its positional ``arguments`` (text, each required), its
    ``options`` (each spelling -> ``(parameter, kind)``), their ``defaults``, and ``run``
    (``module:function`` in this package): ``function(db, durability, **params)`` does the
    command's reading and returns a function that writes its output, or None to leave the
    command to click (nothing done, nothing printed)."""

    def __init__(self, arguments: tuple[str, ...], options: dict[str, tuple[str, str]],
                 defaults: dict[str, object], run: str) -> None:
        self.arguments, self.options, self.defaults, self.run = arguments, options, defaults, run


#: The commands with a fast path (their click commands: cli/reading.py, cli/search.py).
PLAIN: dict[str, Plain] = {
    "sessions": Plain((), {"--json": ("as_json", FLAG)}, {"as_json": False}, "listing:plain_sessions"),
    "search": Plain(("query",), {"--session": ("session_id", TEXT), "--type": ("type_", TEXT),
                                 "--limit": ("limit", COUNT), "-n": ("limit", COUNT),
                                 "--raw": ("raw", FLAG), "--json": ("as_json", FLAG)},
                    {"session_id": None, "type_": None, "limit": 20, "raw": False, "as_json": False},
                    "searching:plain_search"),
    "events": Plain(("session_id",), {"--type": ("types", TEXTS), "--after": ("after_seq", INT)},
                    {"types": (), "after_seq": None}, "dumping:plain_events"),
    "messages": Plain(("session_id",), {"--pretty": ("pretty", FLAG)}, {"pretty": False}, "dumping:plain_messages"),
}

#: The global options (cli/group.py) the fast path takes, before the command (their values
#: as given: click's are plain strings).
GLOBAL = {"--db": ("db", TEXT), "--durability": ("durability", TEXT)}


def parse(args: list[str]) -> tuple[str, str, str, dict[str, object]] | None:
    """``(command, db, durability, params)`` when ``args`` (the command line after
    ``eventstore``) is a :data:`PLAIN` command with nothing for click to decide: global
    options (:data:`GLOBAL`, each at most once, ``--opt VALUE`` or ``--opt=VALUE``), the
    command, then its options (each at most once) and arguments in any order; values from
    ``$EVENTSTORE_DB`` and ``$EVENTSTORE_DURABILITY`` as click reads them; a database a
    command can use and a valid durability. None for anything else."""
    given: dict[str, str] = {}
    rest = list(args)
    while rest and rest[0].startswith("-"):
        if option(rest, GLOBAL, given) is None:
            return None
    if not rest or rest[0] not in PLAIN:
        return None
    command = rest.pop(0)
    plain = PLAIN[command]
    params: dict[str, object] = {}
    words: list[str] = []
    while rest:
        if not rest[0].startswith("-"):
            words.append(rest.pop(0))
            continue
        if option(rest, plain.options, params) is None:
            return None
    if len(words) != len(plain.arguments):
        return None
    try:
        values = {plain.options[name][0]: value(plain.options[name][1], v) for name, v in params.items()}
        values |= {name: utf8_text(word) for name, word in zip(plain.arguments, words, strict=True)}
    except (ValueError, UnicodeError):
        return None
    if len(values) != len(params) + len(words):  # two spellings of one option (-n and --limit)
        return None
    for var in ("EVENTSTORE_DB", "EVENTSTORE_DURABILITY"):
        if os.environ.get(var) == "":  # (an empty variable counts as unset; left to click)
            return None
    db = given.get("--db", os.environ.get("EVENTSTORE_DB", "eventstore.db"))
    durability = given.get("--durability", os.environ.get("EVENTSTORE_DURABILITY", "normal")).lower()
    if durability not in DURABILITIES or not db.strip() or db == ":memory:" or db.lower() in (
            "sqlite://", "sqlite:///:memory:"):
        return None
    return command, db, durability, plain.defaults | values


def option(rest: list[str], options: dict[str, tuple[str, str]], given: dict[str, object]) -> bool | None:
    """Take the option at the head of ``rest`` (one of ``options``, not yet in ``given``
    unless repeatable) and its word into ``given`` (a list of them for a repeatable one; a
    flag's is True). None when it is not one, or not in a form the fast path takes (a value
    starting with ``-``, a flag with ``=``)."""
    name, eq, value = rest.pop(0).partition("=")
    if name not in options or (eq and name[:2] != "--"):
        return None
    kind = options[name][1]
    repeatable = kind == TEXTS
    if name in given and not repeatable:
        return None
    if kind == FLAG:
        if eq:
            return None
        given[name] = True
        return True
    if not eq:
        if not rest:
            return None
        value = rest.pop(0)
    if value.startswith("-"):
        return None
    given[name] = [*given.get(name, ()), value] if repeatable else value
    return True


def value(kind: str, word: object) -> object:
    """An option's value of ``kind`` from its word; ``ValueError`` (or ``UnicodeError``) for
    one the fast path leaves to click."""
    if kind == FLAG:
        return word
    if kind in (COUNT, INT):
        if not (word.isascii() and word.isdigit() and int(word) >= (kind == COUNT)):
            raise ValueError(word)
        return int(word)
    if kind == TEXTS:
        return tuple(utf8_text(w) for w in word)
    return utf8_text(word)


def stdout_is_utf8() -> bool:
    """Whether stdout and stderr are UTF-8 text streams, which click writes to as they are
    (an ASCII one click wraps, and its output may differ)."""
    for stream in (sys.stdout, sys.stderr):
        encoding = getattr(stream, "encoding", None)
        if not isinstance(encoding, str) or encoding.lower().replace("_", "-") not in ("utf-8", "utf8"):
            return False
    return True


def echo(message: str = "", err: bool = False, nl: bool = True) -> None:
    """What ``click.echo`` does with text, to a UTF-8 stream that is not a terminal or is one:
    write it (and a newline), then flush."""
    stream = sys.stderr if err else sys.stdout
    stream.write(message + "\n" if nl else message)
    stream.flush()


def run_plain(args: list[str]) -> bool:
    """Run ``eventstore ARGS`` without click when :func:`parse` allows it, printing exactly
    what the click command prints; False (nothing done, nothing printed) when click must run
    it. An error before the output is written leaves the command to click too, which runs it
    again (the commands only read, or bring the search index up to date: no side effect
    twice) and reports the error as every command does; an error while writing is reported
    as every command reports it too."""
    parsed = parse(args)
    if parsed is None or not stdout_is_utf8():
        return False
    command, db, durability, params = parsed
    module, function = PLAIN[command].run.split(":")
    try:  # (__import__ with a fromlist returns the module itself, without importing importlib)
        run = getattr(__import__(f"{__package__}.{module}", fromlist=[function]), function)
        write = run(db, durability, **params)
    except Exception:
        return False
    except KeyboardInterrupt as e:
        report(e)
        return True
    if write is None:
        return False
    try:
        write()
    except (Exception, KeyboardInterrupt) as e:
        report(e)
    return True


def closing(store, write: Callable[[], None]) -> None:
    """``write()``, then close ``store`` (a command that reads from the store as it writes)."""
    try:
        write()
    finally:
        store.close()


def report(error: BaseException) -> None:
    """Report ``error``, raised while a command ran, as the click group does (cli/base.py)."""
    from .base import invoke_reporting_errors

    def reraise(_ctx: object) -> None:
        raise error

    try:
        invoke_reporting_errors(reraise, None)
    except OSError as e:  # a reader gone away (| head): click's own exit, status 1 and quiet
        import errno

        if e.errno != errno.EPIPE:
            raise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
