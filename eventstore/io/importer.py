"""Importing many JSONL files at once, as ``eventstore import`` does: finding the files,
telling their formats apart, importing each (the store's own JSONL through
:mod:`eventstore.io.bulk`, an agent's transcript through :mod:`eventstore.io.transcripts`),
reporting each problem as one ``FILE: reason`` line while the other files still land,
watching files as they grow, and the totals.

The caller (the command line) gives a ``note`` function for the lines a user should see
and gets an :class:`ImportRun` whose :class:`ImportTotals` say what happened.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from eventstore.errors import DatabaseError, EventStoreError, InvalidJSONL, WalMismatch


class ImportArgumentError(ValueError):
    """The files given cannot be imported together as asked (``-`` twice, a pipe given
    twice, ``--watch`` with a pipe, ``session_id`` with several files): nothing was read."""


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def find_files(paths: Iterable[str], note: Callable[[str], None] = _stderr) -> tuple[list[str], list[str]]:
    """Expand import arguments: a folder means its ``*.jsonl`` files, recursively, sorted;
    ``-`` is stdin. A folder without such files is said through ``note``.

    Returns ``(files, failures)``: ``failures`` holds ``PATH: reason`` for each path that
    cannot be read (a missing path, a folder or subfolder without permission), so that the
    import reports it and fails while the other files still land.
    """
    files: list[str] = []
    failures: list[str] = []
    for p in paths:
        if p == "-":
            files.append(p)
        elif os.path.isdir(p):
            errors: list[OSError] = []
            found = []
            for folder, subfolders, names in os.walk(p, onerror=errors.append):
                subfolders.sort()
                for n in names:
                    path = os.path.join(folder, n)
                    if not n.endswith(".jsonl"):
                        continue
                    if os.path.isfile(path):
                        found.append(path)
                    elif os.path.islink(path) and not os.path.exists(path):
                        failures.append(f"{path}: a symbolic link to nothing ({os.readlink(path)})")
            for e in errors:
                failures.append(f"{e.filename}: cannot read this folder: {e.strerror or e}")
            if not found and not errors:
                note(f"{p}: no *.jsonl files in this folder")
            files.extend(sorted(found))
        else:
            try:
                os.stat(p)
            except FileNotFoundError:
                failures.append(f"{p}: no such file or folder")
            except OSError as e:  # ENAMETOOLONG, ENOTDIR, EACCES, ELOOP: say which
                failures.append(f"{p}: {e.strerror or e}")
            else:
                files.append(p)
    return files, failures


def read_once(files: list[str]) -> set[str]:
    """The import arguments that can be read only once: ``-`` (stdin), and paths that are not
    regular files (a FIFO, ``/dev/fd/N`` of a pipe, a device). Raises
    :class:`ImportArgumentError` for a path that names the same one twice: the second
    reading would find it empty, or wait forever."""
    out: set[str] = set()
    seen: dict[tuple[int, int], str] = {}
    for f in files:
        if f == "-":
            out.add(f)
            continue
        try:
            st = os.stat(f)
        except OSError:
            continue  # the import reports it
        if stat.S_ISREG(st.st_mode):
            continue
        if (st.st_dev, st.st_ino) in seen:
            twice = "" if seen[st.st_dev, st.st_ino] == f else f" (also as {seen[st.st_dev, st.st_ino]})"
            raise ImportArgumentError(f"{f} is not a regular file (a pipe or a device) and can be read only once; "
                                      f"it is given twice{twice}")
        seen[st.st_dev, st.st_ino] = f
        out.add(f)
    return out


def check_arguments(files: list[str], unreadable: list[str], *, session_id: str | None = None,
                    watch: bool = False) -> set[str]:
    """Check that ``files`` (and the ``unreadable`` paths) can be imported as asked; returns
    :func:`read_once` of them. Raises :class:`ImportArgumentError`."""
    if session_id is not None and len(files) + len(unreadable) != 1:
        raise ImportArgumentError(f"--session-id goes with exactly one file ({len(files)} given)")
    if files.count("-") > 1:
        raise ImportArgumentError("- (stdin) can be read only once")
    if watch and "-" in files:
        raise ImportArgumentError("--watch reads files; - (stdin) cannot be watched")
    streams = read_once(files)
    if watch and streams:
        raise ImportArgumentError(f"--watch reads files again as they grow; {next(iter(streams))} is not a regular "
                                  "file (a pipe or a device), which can be read only once: import it without --watch")
    return streams


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


@dataclass
class ImportTotals:
    """What a run imported: sessions ``new`` and ``appended`` to (their ids: a session
    imported twice counts once), ``events`` stored, files ``skipped`` (already stored),
    ``failed``, ``salvaged``, and lines stored in canonical form (``normalized``)."""

    files: int = 0
    new: set = field(default_factory=set)
    appended: set = field(default_factory=set)
    events: int = 0
    skipped: int = 0
    failed: int = 0
    salvaged: int = 0
    normalized: int = 0

    def summary(self) -> str:
        """``files: 2, sessions: 3 (2 new, 1 appended), events: 40, skipped: 0, failed: 0``
        (and ``salvaged``, ``normalized lines`` when there are some)."""
        new, appended = self.new, self.appended - self.new
        parts = [f"files: {self.files}",
                 f"sessions: {len(new) + len(appended)} ({len(new)} new, {len(appended)} appended)",
                 f"events: {self.events}", f"skipped: {self.skipped}", f"failed: {self.failed}"]
        if self.salvaged:
            parts.append(f"salvaged: {self.salvaged}")
        if self.normalized:
            parts.append(f"normalized lines: {self.normalized}")
        return ", ".join(parts)


class ImportRun:
    """Imports files into ``store`` one by one and counts what happened in :attr:`totals`.

    ``fmt`` is a registered format's name (default: detected from each file's first lines);
    ``session_id``, ``append`` and ``salvage`` are :func:`eventstore.io.bulk.import_jsonl`'s
    (``salvage`` also the transcript importer's). ``note(message)`` gets each line a user
    should see (``FILE: reason`` for a failed file; with ``verbose``, one per file);
    ``progress(bytes, events)`` and ``file_done()`` may drive a progress bar.
    """

    def __init__(self, store, *, fmt: str | None = None, session_id: str | None = None, append: bool = False,
                 salvage: bool = False, verbose: bool = False, watching: bool = False,
                 note: Callable[[str], None] = _stderr, progress: Callable[[int, int], None] | None = None,
                 file_done: Callable[[], None] | None = None) -> None:
        from eventstore.io.transcripts.importer import Watcher

        self.store = store
        self.fmt = fmt
        self.session_id = session_id
        self.append = append
        self.salvage = salvage
        self.verbose = verbose
        self.watching = watching
        self.note = note
        self.progress = progress or (lambda _nbytes, _events: None)
        self.file_done = file_done or (lambda: None)
        self.streams: set[str] = set()
        self.watcher = Watcher()
        self.totals = ImportTotals()

    def _tally(self, status: str, sid: str) -> None:
        if status == "imported":
            self.totals.new.add(sid)
        elif status == "appended":
            self.totals.appended.add(sid)
        else:
            setattr(self.totals, status, getattr(self.totals, status) + 1)

    def run(self, files: list[str], unreadable: Iterable[str] = (), streams: set[str] | None = None) -> ImportTotals:
        """Import ``files`` (as :func:`find_files` gives them; ``streams`` those of them read
        only once, :func:`check_arguments`); each of ``unreadable`` counts as failed and is
        said through ``note``. Returns :attr:`totals`."""
        self.streams = read_once(files) if streams is None else streams
        for message in unreadable:
            self.totals.failed += 1
            self.note(message)
        for f in files:
            if f not in self.streams:
                list(self.watcher.due([f]))
            self.import_file(f)
        self.totals.files = len(files)
        return self.totals

    def watch(self, paths: Iterable[str], interval: float) -> None:
        """Look at ``paths`` every ``interval`` seconds and import the files that are new or
        grew, until interrupted (``KeyboardInterrupt`` is raised to the caller; the totals
        count every file seen)."""
        paths = list(paths)
        try:
            while True:
                time.sleep(interval)
                found, _unreadable = find_files(paths, note=lambda _message: None)
                for f in self.watcher.due(found):
                    self.import_file(f, quiet=True)
        finally:
            self.totals.files = len(self.watcher.seen)

    def import_file(self, f: str, quiet: bool = False) -> None:
        """Import one file (``-``: stdin), count what happened, :attr:`note` what a user
        should see. A file that fails is counted and said; ``KeyboardInterrupt`` is raised
        again with what was interrupted and how to complete it."""
        from eventstore.io.bulk import import_jsonl
        from eventstore.io.transcripts import detect as _detect
        from eventstore.io.transcripts.importer import import_transcript

        streamed = f in self.streams
        try:
            if self.watching and not streamed and os.path.getsize(f) == 0:  # a file being created:
                return  # its agent has not written yet; the look after it grows imports it
        except OSError:
            pass  # said below
        opened = None
        try:
            if streamed:  # opened once (a pipe has no second reading): detection's bytes are read again
                source = sys.stdin.buffer if f == "-" else (opened := open(f, "rb"))
                head = _detect.read_head(source)
                source = _detect.replay(head, source)
                detected = _detect.detect(head.data)
            else:
                source = f
                detected = _detect.detect_file(f)
            kind = self.fmt or detected
            if kind is None and not streamed and _detect.first_line_unfinished(f):
                # (an agent is writing its first line: as an unfinished last line, it waits)
                if not self.watching:
                    self.note(f"{f}: its first line is not complete yet (no newline): it waits for the next run")
                self.totals.skipped += 1
                return
            if kind is None:
                raise InvalidJSONL(f, *(_detect.head_reason(head) if streamed else _detect.undetected_reason(f)))
            if detected is not None and detected != kind:  # --format is for files whose first lines do not say
                article = "an" if detected[0] in "aeiou" else "a"
                raise InvalidJSONL(f, 0, f"this is {article} {detected} file, not {kind}: give --format {detected}, "
                                         "or leave --format out")
            if kind != "eventstore" and self.session_id is not None:
                raise InvalidJSONL(f, 0, f"--session-id is for an eventstore file without a session/meta line: "
                                         f"a {kind} transcript names its sessions itself")
            if kind != "eventstore":
                rep = import_transcript(self.store, f, kind, salvage=self.salvage,
                                        stream=source if streamed else None)
            else:
                rep = import_jsonl(self.store, source, name=f, session_id=self.session_id, append=self.append,
                                   salvage=self.salvage, progress=self.progress)
        except InvalidJSONL as e:
            self.note(str(e))
            self.totals.failed += 1
            return
        except RecursionError:  # a value nested deeper than a line reader caught (a converter's, the store's)
            self.note(f"{f}: nested too deeply (a JSON value deeper than eventstore can follow); nothing of it "
                      "is stored")
            self.totals.failed += 1
            return
        except KeyboardInterrupt:  # what was stored of this file is kept; importing it again completes it
            what = (f"{f}{' (stdin)' if f == '-' else ''}: importing the same input" if streamed
                    else f"{f}: running the same command")
            raise KeyboardInterrupt(f"while importing {what} again completes it") from None
        except (EventStoreError, OSError) as e:
            reason = f"{e.strerror}" if isinstance(e, OSError) and e.strerror else str(e)
            self.note(f"{f}: {reason}")
            self.totals.failed += 1
            if isinstance(e, DatabaseError) and not isinstance(e, WalMismatch):
                self.watcher.forget(f)  # the database was away or busy, not the file: the next look tries again
            return
        finally:
            if opened is not None:
                opened.close()
            self.file_done()
        if kind != "eventstore":
            self._transcript_done(f, rep, quiet)
        else:
            self._jsonl_done(f, rep, quiet)

    def _transcript_done(self, f: str, rep, quiet: bool) -> None:
        verbose = self.verbose
        for r in rep.sessions:
            self._tally(r.status, r.session_id)
            self.totals.events += r.events
            sid = json.dumps(r.session_id, ensure_ascii=False)
            if verbose or (self.watching and quiet and r.events):
                self.note(f"{f}: {r.status} session {sid}: {_plural(r.events, 'event')}"
                          + (f" ({r.held} lines wait for the rest of their message)" if r.held else "")
                          + (f" (the stored session holds the file's {r.total - r.ahead} events and {r.ahead} more)"
                             if r.ahead else ""))
        if rep.dropped:
            self.totals.salvaged += 1
            self.note(f"{f}: salvaged: dropped {len(rep.dropped)} line(s): " + "; ".join(rep.dropped))
        if rep.waiting and verbose:
            self.note(f"{f}: the last line is incomplete; it waits for the next run")
        if verbose and rep.folded:
            self.note(f"{f}: where its lines went: {rep.folded_text()}")
        self.progress(0 if f in self.streams else os.path.getsize(f), 0)

    def _jsonl_done(self, f: str, rep, quiet: bool) -> None:
        self._tally(rep.status, rep.session_id)
        self.totals.events += rep.events
        self.totals.normalized += rep.normalized
        sid = json.dumps(rep.session_id, ensure_ascii=False)
        if rep.dropped is not None:
            self.totals.salvaged += 1
            self.note(f"{f}: salvaged {_plural(rep.events, 'event')} of session {sid}; {rep.dropped}")
        elif rep.status == "skipped" and not quiet:
            self.note(f"{f}: skipped: session {sid} is already stored ({rep.note})")
        elif self.verbose or (self.watching and quiet and rep.events):
            self.note(f"{f}: {rep.status} session {sid}: {_plural(rep.events, 'event')}")
        if rep.status == "imported" and rep.note and not quiet:  # completed an unfinished import
            self.note(f"{f}: {rep.note}")
        if self.verbose and rep.normalized:
            self.note(f"{f}: {rep.normalized} lines stored in canonical form (export writes them that way)")
