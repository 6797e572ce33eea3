"""Make the schema-history fixtures of tests/test_migrations.py with the eventstore of main
ccb5db7 (schema head 0290): run from a checkout of that commit, with tests/ on sys.path.

    PYTHONPATH=$PWD:$PWD/tests EVENTSTORE_PG_BINDIR=/usr/lib/postgresql/15/bin python make.py OUT

Writes OUT/schema-0290.db (import of the files below), OUT/schema-0220.db and
OUT/schema-0100.db (empty files migrated to that revision with that commit's migrations,
then the 0290 file's sessions and events rows copied in, in position order), and
OUT/schema-0290.pg.sql (pg_dump --no-owner --no-privileges of a PostgreSQL database the
same import wrote), OUT/schema-0220.pg.sql (a PostgreSQL database migrated to 0220, the
0290 file's rows copied in) and OUT/schema-0290.reads.json (what that commit's library
reads from the 0290 file: each session's export and messages).
"""

import io
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path.cwd()
SHARED = ROOT.parent / "shared" / "transcripts"
FILES = [ROOT / "tests/data/parallel_tools.jsonl", ROOT / "tests/data/unicode.jsonl",
         ROOT / "tests/data/extra_fields.jsonl",
         SHARED / "claude-code/v2.1-interleaved-results.jsonl", SHARED / "codex/rollout-0.40-counter-reset.jsonl"]


def cli(db, *args):
    subprocess.run([sys.executable, "-m", "eventstore", "--db", db, *args], check=True)


def at_revision(path, revision):
    """Migrate the empty database ``path`` (a file, or an SQLAlchemy URL) to ``revision``."""
    from alembic import command
    from alembic.config import Config
    from eventstore.backends.sqlite_engine import migrations_path
    from sqlalchemy import create_engine

    engine = create_engine(path if "://" in str(path) else f"sqlite:///{path}")
    with engine.begin() as conn:
        cfg = Config()
        cfg.set_main_option("script_location", migrations_path())
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
    engine.dispose()


def main(out: Path):
    out.mkdir(parents=True, exist_ok=True)
    head = out / "schema-0290.db"
    for p in out.glob("schema-*"):
        p.unlink()
    cli(str(head), "import", *map(str, FILES))
    cli(str(head), "verify")
    for f in out.glob("schema-0290.db-*"):
        f.unlink()
    src = sqlite3.connect(head)
    for revision in ("0220", "0100"):
        old = out / f"schema-{revision}.db"
        at_revision(old, revision)
        dst = sqlite3.connect(old)
        cols = "id, created_at, meta, meta_hash" if revision >= "0210" else "id, created_at, meta"
        with dst:
            for row in src.execute(f"SELECT {cols} FROM sessions ORDER BY rowid"):
                dst.execute(f"INSERT INTO sessions ({cols}) VALUES ({', '.join('?' * len(row))})", row)
            for row in src.execute("SELECT position, session_id, seq, type, ts, payload, hash FROM events "
                                   "ORDER BY position"):
                dst.execute("INSERT INTO events (position, session_id, seq, type, ts, payload, hash) "
                            "VALUES (?, ?, ?, ?, ?, ?, ?)", row)
        dst.execute("VACUUM")
        dst.close()
    src.close()

    from eventstore import EventStore

    reads = {}
    with EventStore.open(head, readonly=True) as store:
        for info in store.sessions():
            buf = io.BytesIO()
            store.export_jsonl(info.id, buf)
            reads[info.id] = {"export": buf.getvalue().decode(), "events": info.events,
                              "messages": json.loads(store.session(info.id).messages_json())}
    (out / "schema-0290.reads.json").write_text(json.dumps(reads, indent=1, sort_keys=True, ensure_ascii=False))

    import psycopg
    from pgserver import PgServer

    with PgServer() as server:
        name = server.create_database("fixture")
        url = server.url(name)
        cli(url, "import", *map(str, FILES))
        cli(url, "verify")
        dump = subprocess.run([str(server.bindir / "pg_dump"), "--no-owner", "--no-privileges", url],
                              check=True, capture_output=True, text=True).stdout
        (out / "schema-0290.pg.sql").write_text(dump)
        name = server.create_database("fixture_0220")
        at_revision(server.url(name).replace("postgresql://", "postgresql+psycopg://"), "0220")
        src = sqlite3.connect(head)
        with psycopg.connect(server.url(name)) as pg:
            for row in src.execute("SELECT id, created_at, meta, meta_hash FROM sessions ORDER BY rowid"):
                pg.execute("INSERT INTO sessions (id, created_at, meta, meta_hash) VALUES (%s, %s, %s, %s)", row)
            for row in src.execute("SELECT position, session_id, seq, type, ts, payload, hash FROM events "
                                   "ORDER BY position"):
                pg.execute("INSERT INTO events (position, session_id, seq, type, ts, payload, hash) "
                           "VALUES (%s, %s, %s, %s, %s, %s, %s)", row)
        src.close()
        dump = subprocess.run([str(server.bindir / "pg_dump"), "--no-owner", "--no-privileges", server.url(name)],
                              check=True, capture_output=True, text=True).stdout
        (out / "schema-0220.pg.sql").write_text(dump)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
