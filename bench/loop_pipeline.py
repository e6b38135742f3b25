"""Whether the run driver's writes would cost the worker less sent together: N one-row
statements at once on the process loop, each through ``agents.loop_db.fetch_all`` (a
connection of the loop's pool per statement, as the steps' writes go), against all N on one
connection in psycopg's pipeline mode with a sync after each (each still its own
transaction). Alternating rounds; this process's CPU per statement (PostgreSQL only).

    .venv/bin/python bench/loop_pipeline.py --statements 200 --rounds 12
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

import live
import psycopg

from agents import loop_db
from agents.process_loop import process_loop
from agents.services.conversations import conversation_create

# A write of one row that changes nothing, on rows of this bench's own user.
SQL = "UPDATE agents_conversation SET last_seq = last_seq WHERE id = %(id)s RETURNING id"


async def pooled(ids: list[int], _: psycopg.AsyncConnection) -> None:
    await asyncio.gather(*(loop_db.fetch_all(SQL, {"id": pk}) for pk in ids))


async def pipelined(ids: list[int], conn: psycopg.AsyncConnection) -> None:
    cursors = []
    async with conn.pipeline() as pipeline:
        for pk in ids:
            cursor = conn.cursor()
            await cursor.execute(SQL, {"id": pk}, prepare=True)
            await pipeline.sync()
            cursors.append(cursor)
    for cursor in cursors:
        await cursor.fetchall()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--statements", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=12)
    args = parser.parse_args()
    live.migrate()
    if not loop_db.available():
        raise SystemExit("the loop's connections are PostgreSQL's only: set DATABASE_URL")
    user = live.make_user("looppipeline")
    ids = [conversation_create(owner=user).pk for _ in range(args.statements)]
    loop = process_loop()

    def on_loop(coroutine: Awaitable[object]) -> object:
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result()  # type: ignore[arg-type]

    conn = on_loop(psycopg.AsyncConnection.connect(**loop_db._connect_kwargs()))
    ways: dict[str, Callable[..., Awaitable[None]]] = {"pooled": pooled, "pipelined": pipelined}
    spent: dict[str, list[float]] = {name: [] for name in ways}
    names = list(ways)
    for round_number in range(args.rounds + 2):
        for name in names if round_number % 2 == 0 else reversed(names):
            began = time.process_time()
            on_loop(ways[name](ids, conn))
            if round_number >= 2:  # the first two warm the pool and the prepared statements
                spent[name].append((time.process_time() - began) * 1000 / len(ids))
    on_loop(conn.close())
    print(f"CPU ms per statement, {len(ids)} at once, {args.rounds} rounds:")
    for name, values in spent.items():
        rounds = ", ".join(f"{value:.3f}" for value in values)
        print(f"  {name:10s} median {statistics.median(values):.3f}  ({rounds})")


if __name__ == "__main__":
    main()
