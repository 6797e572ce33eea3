"""Bounded memory: a 20 MB event line, a file of many batches and a one-million-event file
import (and export) with peak memory that does not grow with the file. Each runs in a child
process that reports its own peak RSS (``VmHWM``, reset once the store is open) and its RSS
before the work started. (Not ``ru_maxrss``: Linux carries the parent's peak at fork into
the child's, so a test process that just wrote a 100 MB file would count it.)

The files are generated here, never committed. The one-million-event file takes the
longest (half a minute or more on a busy machine): it is marked ``slow`` (run it with
``pytest -m slow``), with the sizes as shipped. The default run keeps the 20 MB line and a
31 MB file of 30,000 larger events, read with the sizes that bound the working set (batches,
chunks, pages, buffers, SQLite's cache) divided by 5: the file is to them as a 155 MB file
is to the shipped sizes (a 100 MB file took a minute on a busy machine).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import new_sqlite_store

MB = 1 << 20

CHILD = r"""
import json, sys, time
from eventstore import EventStore
from eventstore.io.bulk import import_jsonl
from eventstore.io.export import export_session

def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024

db, path, what, scale = sys.argv[1:5]
if int(scale) > 1:  # the sizes that bound the working set, divided by scale (see check_bounded)
    from eventstore.backends.sqlite import engine, export as sqlite_export
    from eventstore.io import bulk, jsonl, parse_worker
    from eventstore.log import line
    for module, names in ((bulk, ("BATCH_ROWS", "BATCH_BYTES", "CHUNK_ROWS", "CHUNK_BYTES")),
                          (parse_worker, ("WORKER_BATCH_ROWS",)),
                          (engine, ("CACHE_SIZE_KIB",)), (line, ("PAGE_ROWS", "PAGE_BYTES", "EXPORT_BUFFER")),
                          (sqlite_export, ("EXPORT_PAGE", "EXPORT_BUFFER")), (jsonl.JsonlReader, ("CHUNK",))):
        for name in names:
            setattr(module, name, getattr(module, name) // int(scale))
store = EventStore.open(db)
base = status("VmRSS")
try:  # start the high-water mark afresh (Linux 4.0+); VmHWM is this process's own
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
except OSError:
    pass
t = time.perf_counter()
if what == "import":
    n = import_jsonl(store, path).events
else:
    with open(path, "wb") as f:
        n = export_session(store, what, f)
secs = time.perf_counter() - t
print(json.dumps({"base": base, "peak": status("VmHWM"), "events": n, "seconds": secs}))
"""

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc (Linux)")


def child(db: Path, path: Path, what: str, scale: int = 1) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(db), str(path), what, str(scale)],
                         capture_output=True, text=True, timeout=600, check=False)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_a_20_mb_event_line(tmp_path):
    text = ("0123456789abcdef" * (20 * MB // 16))[: 20 * MB]
    path = tmp_path / "long.jsonl"
    head = b'{"type":"session/meta","id":"long"}\n{"type":"user/message","seq":0,"ts":1,"content":"hi"}\n'
    with open(path, "wb") as f:
        f.write(head)
        f.write(b'{"type":"tool/result","seq":1,"ts":2,"tool_call_id":"c","content":"' + text.encode() + b'"}\n')
        f.write(b'{"type":"user/message","seq":2,"ts":3,"content":"\\u00e9 after"}\n')  # the slow path too
    size = path.stat().st_size
    db = new_sqlite_store(tmp_path / "long.db")
    got = child(db, path, "import")
    assert got["events"] == 3
    grew = got["peak"] - got["base"]
    # a few copies of the one long line (file bytes, parsed text, payload, SQLite's binding,
    # and one for the guard trigger's look at the payload's top-level keys)
    assert grew < 9 * 20 * MB, f"peak grew by {grew / MB:.0f} MB for a {size / MB:.0f} MB line"
    out = tmp_path / "long.out.jsonl"
    got = child(db, out, "long")
    assert got["events"] == 3
    assert got["peak"] - got["base"] < 6 * 20 * MB
    with open(out, "rb") as a, open(path, "rb") as b:
        assert a.read(200) == b.read(200)
    assert out.stat().st_size == size - len(b"\\u00e9") + len("é".encode())


def write_million(path: Path, events: int, pad: int = 0, sid: str = "million") -> None:
    """``events`` assistant/chunk events, written fast (about 90 + ``pad`` bytes a line)."""
    with open(path, "wb") as f:
        f.write(b'{"type":"session/meta","id":"%s"}\n' % sid.encode())
        line = '{{"type":"assistant/chunk","seq":{},"ts":{},"delta":{{"content":"tok{}{}"}}}}\n'.format
        text = "x" * pad
        step = 50_000
        for start in range(0, events, step):
            f.write("".join([line(i, 1764460800 + i / 1000, i % 97, text)
                             for i in range(start, min(events, start + step))]).encode())


def test_a_file_of_many_batches_imports_and_exports_in_bounded_memory(tmp_path):
    check_bounded(tmp_path, 30_000, 1000, scale=5)


@pytest.mark.slow
def test_one_million_events_import_and_export_in_bounded_memory(tmp_path):
    check_bounded(tmp_path, 1_000_000, 0)


def check_bounded(tmp_path: Path, n: int, pad: int, scale: int = 1) -> None:
    """``n`` events import and export with the peak growing by less than a third of the
    file, the working set's sizes divided by ``scale`` (growth measured: 15 MB for 104 MB as
    shipped; 4 MB for 31 MB with scale 5)."""
    path = tmp_path / "million.jsonl"
    write_million(path, n, pad)
    size = path.stat().st_size
    db = new_sqlite_store(tmp_path / "million.db")
    got = child(db, path, "import", scale)
    assert got["events"] == n
    grew = got["peak"] - got["base"]
    assert grew < size / 3, f"import: peak grew by {grew / MB:.0f} MB for a {size / MB:.0f} MB file"
    out = tmp_path / "million.out.jsonl"
    got = child(db, out, "million", scale)
    assert got["events"] == n
    grew = got["peak"] - got["base"]
    assert grew < size / 3, f"export: peak grew by {grew / MB:.0f} MB for a {size / MB:.0f} MB file"
    # the file was canonical except for ts values such as 1764460800.0 (JavaScript writes 1764460800)
    with open(out, "rb") as a, open(path, "rb") as b:
        for x, y in zip(a, b, strict=True):
            if x != y:
                assert x == y.replace(b'.0,"delta"', b',"delta"')
    assert out.stat().st_size == size - sum(1 for i in range(0, n, 1000)) * 2
