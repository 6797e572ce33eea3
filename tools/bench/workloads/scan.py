"""Secret scanning: ``eventstore scan`` over agent sessions where a few events hold a secret and
many hold what looks like one at a glance (code naming keys and tokens, URLs), against
detect-secrets' detectors run on every payload without the prefilter."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import orjson

from eventstore import EventStore

from .. import data
from ..harness import ES, ROOT, command, timed

SUMMARY = "`eventstore scan` of agent sessions (1 event in 2,000 holds a secret); every detector on every payload"
NAME = "Scan"

#: Tool output that looks like a secret at a glance (the prefilter lets it through) and is none.
NEAR_MISSES = (
    'api_key = os.environ["OPENAI_API_KEY"]\nclient = OpenAI(api_key=api_key)',
    "input_tokens: 1520, output_tokens: 311, cache_read_tokens: 0",
    "git remote -v\norigin  https://github.com/acme/app.git (fetch)",
    'password: "${DB_PASSWORD}"\nhost: db.internal\nport: 5432',
    "Set AWS credentials with `aws configure`; the secret key is read from ~/.aws/credentials",
    "def get_token(self) -> str:\n    return self._token_cache.get(self.scope)",
)
#: Fake secrets of the right shape (one per event that holds one).
SECRETS = (
    "OPENAI_API_KEY=sk-proj-Ab3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI3kM5oQ7sT3BlbkFJu9wY1aC3eG5iK7mO9qS1",
    "aws_access_key_id = AKIAQ3EGRT7XZJ4KPL2M",
    "GITHUB_TOKEN=ghp_R4nd0mT0kenValue1234567890abcdEFGHij",
    "DATABASE_URL=postgres://app:Xq7Lm2Vz9RtK@db.internal:5432/app",
)
EVERY = 2000  # one event in this many holds a secret


def events(seed: int):
    """:func:`tools.bench.data.agent_events`, with near misses in one tool result of three and a
    secret in one event of :data:`EVERY`."""
    due = EVERY // 4  # events until the next secret
    planted = 0
    for n, (type_, payload) in enumerate(data.agent_events(seed)):
        due -= 1
        if type_ == "tool/result":
            if due <= 0:
                payload = {**payload, "content": f"$ cat .env\n{SECRETS[planted % len(SECRETS)]}\nDEBUG=1"}
                planted += 1
                due = EVERY
            elif n % 3 == 0:
                payload = {**payload, "content": payload["content"] + "\n" + NEAR_MISSES[n % len(NEAR_MISSES)]}
        yield type_, payload


def corpus(bench, files: int, per: int):
    folder = bench.workdir / "scan-corpus" / f"{files}x{per}"
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for k in range(files):
        sid, path = f"session-{k:04d}", folder / f"session-{k:04d}.jsonl"
        if not path.exists():
            data.write_jsonl(path, sid, data.take(events(1 + k), per))
        out.append(path)
    return out


def scan_command(db: str) -> float:
    """Seconds of one ``eventstore scan`` (stdout to /dev/null); it exits with 1: secrets found."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    t0 = time.perf_counter()
    proc = subprocess.run(command("scan", db=db), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
                          cwd=ROOT)
    dt = time.perf_counter() - t0
    if proc.returncode != 1:
        raise RuntimeError(f"eventstore scan: exit status {proc.returncode}: {proc.stderr.decode()[-500:]}")
    return dt


def run(bench) -> None:
    """Import the corpus, then time the scan in process, as a command, and the unfiltered baseline."""
    from eventstore.audit.secrets import PLUGINS, scan_store

    files, per = bench.pick((4, 1000), (50, 20_000))
    paths = corpus(bench, files, per)
    db = bench.target("scan")
    n = files * per
    with EventStore.open(db) as store:
        for path in paths:
            store.import_jsonl(path)
        found = list(scan_store(store))
        with_secret = sum(1 for p in paths for line in open(p, "rb") if b"cat .env" in line)
        bench.check("scan finds every planted secret, nothing else", len(found) == with_secret,
                    f"{len(found)} findings, {with_secret} planted")
        bench.measure(NAME, f"{n:,} events in {files} sessions",
                      {ES: lambda: timed(lambda: list(scan_store(store)), n),
                       f"{ES} scan": lambda: scan_command(db) / n},
                      "event", {ES: "list(scan_store(store)): read, prefilter, detectors on the few hits",
                                f"{ES} scan": "the command, a fresh interpreter, table to /dev/null"})
        sample = [orjson.loads(line) for line in open(paths[0], "rb")][1:bench.pick(1000, 20_000)]
        texts = [orjson.dumps({k: v for k, v in e.items() if k not in ("type", "seq", "ts")}).decode()
                 for e in sample]

        def unfiltered() -> None:
            for text in texts:
                for plugin in PLUGINS:
                    list(plugin.detector.analyze_string(text))

        bench.measure(NAME, f"{len(texts):,} payloads, in memory",
                      {"every detector, no prefilter": lambda: timed(unfiltered, len(texts)),
                       ES: lambda: timed(lambda: _scan(texts), len(texts))},
                      "event", {"every detector, no prefilter": "detect-secrets' analyze_string of each plugin "
                                                                "over each payload's JSON text",
                                ES: "candidates() over the batch, then scan_payload of the events it lets through"})


def _scan(texts: list[str]) -> list:
    """What scan_store does with a page of payload texts."""
    from eventstore.audit.secrets import candidates, scan_payload

    return [scan_payload(orjson.loads(texts[i])) for i in candidates(texts)]


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run it through: python -m tools.bench run scan")
