"""Peak memory of ``eventstore sql --csv`` on PostgreSQL for a 200 MB result (200,000 rows
of 1 KB), with stdout to /dev/null: ``python tools/bench_sql_pg_memory.py [CHECKOUT]``
(a throwaway server from tests/pgserver.py; EVENTSTORE_PG_BINDIR names PostgreSQL's bin
folder; CHECKOUT, by default this one, is the tree whose eventstore runs)."""

import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(HERE, "tests"))
root = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else HERE
sys.path.insert(0, root)

from pgserver import PgServer  # noqa: E402

from eventstore import EventStore  # noqa: E402

QUERY = "SELECT g, repeat('x', 1000) AS pad FROM generate_series(1, 200000) AS g"

with PgServer() as srv:
    srv.start()
    url = srv.url(srv.create_database())
    EventStore.open(url).close()
    t = time.monotonic()
    p = subprocess.Popen([sys.executable, "-m", "eventstore", "--db", url, "sql", "--csv", "--timeout", "0", QUERY],
                         stdout=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": root}, cwd=root)
    _, status, usage = os.wait4(p.pid, 0)
    print(f"{root}: exit {os.waitstatus_to_exitcode(status)}, peak RSS {usage.ru_maxrss / 1024:.1f} MiB, "
          f"{time.monotonic() - t:.1f} s")
