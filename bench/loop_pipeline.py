"""Whether the run driver's writes would cost the worker less sent together: N one-row
statements at once on the process loop, each through ``chatsite.server.db.loop_pool.fetch_all`` (a
connection of the loop's pool per statement, as the steps' writes go), against all N sent
on one connection in psycopg's pipeline mode with one sync at the end. Alternating rounds;
this process's CPU per statement (PostgreSQL only).

The pipelined way is the most batching could save, not a way the driver could write: up to
a sync, PostgreSQL runs the statements as one implicit transaction, so one run's failed
write would undo the others'. Keeping each its own transaction takes a sync after each, and
psycopg's ``Pipeline.sync`` waits for the results: a round trip per statement again.

    .venv/bin/python bench/loop_pipeline.py --statements 200 --rounds 12
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import time
from collections.abc import Callable, Coroutine
from typing import Any

import live
import psycopg

from agents.services.conversations import conversation_create
from chatsite.server.db import loop_pool
from chatsite.server.loop import process_loop

# A write of one row that changes nothing, on rows of this bench's own user.
SQL = "UPDATE agents_conversation SET last_seq = last_seq WHERE id = %(id)s RETURNING id"


async def pooled(ids: list[int], _: psycopg.AsyncConnection) -> None:
    rows = await asyncio.gather(*(loop_pool.fetch_all(SQL, {"id": pk}) for pk in ids))
    _check_every_row_written(ids, rows)


async def pipelined(ids: list[int], conn: psycopg.AsyncConnection) -> None:
    cursors = []
    async with conn.pipeline():  # its end sends the one sync and reads every result
        for pk in ids:
            cursor = conn.cursor()
            await cursor.execute(SQL, {"id": pk}, prepare=True)
            cursors.append(cursor)
    _check_every_row_written(ids, [await cursor.fetchall() for cursor in cursors])


def _check_every_row_written(ids: list[int], rows: list[list[tuple[int]]]) -> None:
    if [row for found in rows for (row,) in found] != ids:
        raise SystemExit("a statement did not write its row: the figures would not compare")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--statements", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args()
    live.migrate()
    if not loop_pool.available():
        raise SystemExit("the loop's connections are PostgreSQL's only: set DATABASE_URL")
    user = live.make_user("looppipeline")
    ids = [conversation_create(owner=user).pk for _ in range(args.statements)]
    loop = process_loop()

    def on_loop(coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result()

    conn = on_loop(psycopg.AsyncConnection.connect(**loop_pool._connect_kwargs()))
    ways = {"pooled": pooled, "pipelined": pipelined}

    def cpu_ms_per_statement(way: Callable[..., Coroutine[Any, Any, None]]) -> float:
        began = time.process_time()
        on_loop(way(ids, conn))
        return (time.process_time() - began) * 1000 / len(ids)

    rounds = {name: functools.partial(cpu_ms_per_statement, way) for name, way in ways.items()}
    live.alternating_rounds(rounds, 2)  # not counted: they warm the pool and the statements
    spent = live.alternating_rounds(rounds, args.rounds)
    on_loop(conn.close())
    live.print_medians(f"CPU ms per statement, {len(ids)} at once, {args.rounds} rounds:", spent)


if __name__ == "__main__":
    main()
