"""Batched appends: 100 events a transaction."""

from __future__ import annotations

import asyncio

from eventstore import EventStore

from .. import data
from ..harness import ES, timed
from ..peers import agents_sdk, eventsourcing_lib
from ._systems import raw_log, sqlite_peers, store_settings

SUMMARY = "append_many of 100 events a transaction; raw executemany/unnest, SDK add_items, eventsourcing"
NAME = "Batched appends"


def run(bench) -> None:
    """Time batches of 100 by every system."""
    batches, size = bench.pick(10, 50), 100
    case = f"{batches} batches of {size}"
    gen = data.agent_events(7)

    def make() -> list[list]:
        return [data.take(gen, size) for _ in range(batches)]

    store = EventStore.open(bench.target("batch"), durability=bench.durability)
    s = store.create_session("bench")
    log, raw_name, close_raw = raw_log(bench, "batch")
    n = batches * size

    def es() -> float:
        work = make()
        return timed(lambda: [s.append_many(b) for b in work], n)

    def raw() -> float:
        work = make()
        return timed(lambda: [log.append_many(b) for b in work], n)

    systems = {ES: es, raw_name: raw}
    notes = {ES: f"Session.append_many; {store_settings(store)}",
             raw_name: "one statement of the batch in one transaction"}
    closers = [store.close, close_raw]
    peers = sqlite_peers(bench)
    if peers.get(agents_sdk.NAME) == "":
        loop = asyncio.new_event_loop()
        sdk = agents_sdk.session("bench", bench.folder("batch") / "sdk.db", bench.durability)

        def sdk_block() -> float:
            work = [[agents_sdk.item(t, p) for t, p in b if t in ("user/message", "assistant/message", "tool/result",
                                                                    "assistant/chunk")][:size] for b in make()]
            count = sum(map(len, work))

            async def go():
                for b in work:
                    await sdk.add_items(b)
            return timed(lambda: loop.run_until_complete(go()), count)

        systems[agents_sdk.NAME] = sdk_block
        notes[agents_sdk.NAME] = "add_items of the batch's items"
        closers += [sdk.close, loop.close]
    if peers.get(eventsourcing_lib.NAME) == "":
        rec = eventsourcing_lib.Recorder(bench.folder("batch") / "evsrc.db")

        def ev_block() -> float:
            work = make()
            return timed(lambda: [rec.append_many(b) for b in work], n)

        systems[eventsourcing_lib.NAME] = ev_block
        notes[eventsourcing_lib.NAME] = "insert_events of 100; synchronous=NORMAL"
        closers.append(rec.close)
    for name, reason in peers.items():
        if reason:
            bench.skip(NAME, case, name, reason)
    figs = bench.measure(NAME, case, systems, "event", notes)
    if agents_sdk.NAME in figs:  # its connections exist once it has run
        figs[agents_sdk.NAME].note += "; " + agents_sdk.session_settings(sdk)
    bench.check("batch: eventstore seqs gapless", s.next_seq() == n * bench.rounds, s.next_seq())
    for close in closers:
        close()
