"""Single appends: one event per transaction into a session that already holds N events."""

from __future__ import annotations

import asyncio

from eventstore import EventStore

from .. import data
from ..harness import ES, timed
from ..peers import agents_sdk, eventsourcing_lib
from ._systems import raw_log, sqlite_peers, store_settings

SUMMARY = "single appends (one event a transaction) into a session of N events; raw driver, SDK, eventsourcing"
NAME = "Single appends"


def run(bench) -> None:
    """Time single appends at each size."""
    sizes = bench.pick([200], [1_000, 10_000, 100_000])
    block = bench.pick(100, 500)
    for size in sizes:
        _at(bench, size, block)


def _at(bench, size: int, block: int) -> None:
    case = f"session of {size:,} events"
    fill = [("assistant/chunk", data.chunk(i)) for i in range(size)]
    counter = iter(range(10**9))
    store = EventStore.open(bench.target(f"append-{size}"), durability=bench.durability)
    s = store.create_session("bench")
    for k in range(0, size, 5000):
        s.append_many(fill[k:k + 5000])
    log, raw_name, close_raw = raw_log(bench, f"append-{size}")
    for k in range(0, size, 5000):
        log.append_many(fill[k:k + 5000])

    def es() -> float:
        return timed(lambda: [s.append("assistant/chunk", data.chunk(next(counter))) for _ in range(block)], block)

    def raw() -> float:
        return timed(lambda: [log.append("assistant/chunk", data.chunk(next(counter))) for _ in range(block)], block)

    systems = {ES: es, raw_name: raw}
    notes = {ES: f"Session.append, durability {bench.durability}: {store_settings(store)}",
             raw_name: "same transaction, JSON library, salted hash"}
    closers = [store.close, close_raw]
    peers = sqlite_peers(bench)
    if peers.get(agents_sdk.NAME) == "":
        loop = asyncio.new_event_loop()
        sdk = agents_sdk.session("bench", bench.folder(f"append-{size}") / "sdk.db", bench.durability)
        loop.run_until_complete(sdk.add_items([agents_sdk.item(t, p) for t, p in fill]))

        async def sdk_block() -> None:
            for _ in range(block):
                await sdk.add_items([agents_sdk.item("assistant/chunk", data.chunk(next(counter)))])

        systems[agents_sdk.NAME] = lambda: timed(lambda: loop.run_until_complete(sdk_block()), block)
        notes[agents_sdk.NAME] = "add_items([item]); " + agents_sdk.session_settings(sdk)
        closers += [sdk.close, loop.close]
    if peers.get(eventsourcing_lib.NAME) == "":
        rec = eventsourcing_lib.Recorder(bench.folder(f"append-{size}") / "evsrc.db")
        rec.append_many(fill)
        systems[eventsourcing_lib.NAME] = lambda: timed(
            lambda: [rec.append("assistant/chunk", data.chunk(next(counter))) for _ in range(block)], block)
        notes[eventsourcing_lib.NAME] = "insert_events([event]); synchronous=NORMAL"
        closers.append(rec.close)
    for name, reason in peers.items():
        if reason:
            bench.skip(NAME, case, name, reason)
    bench.measure(NAME, case, systems, "append", notes)
    bench.check(f"append {case}: eventstore seqs gapless",
                [e.seq for e in s.events()] == list(range(s.next_seq())), s.next_seq())
    for close in closers:
        close()
