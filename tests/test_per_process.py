"""``PerProcess``: one object per process, shared by threads that ask at once, made again in
a forked child (which inherits the object but not the threads or sockets it owns), even one
forked while another thread was making it."""

from __future__ import annotations

import os
import threading

from chatsite.server.per_process import PerProcess

WAIT_SECONDS = 10  # a ceiling for a child or a thread that should end at once


def _in_a_forked_child(check) -> int:
    """``check()`` in a forked child; its exit code (0: it returned true, 3: it raised)."""
    child = os.fork()
    if child == 0:
        try:
            code = 0 if check() else 1
        except BaseException:
            code = 3
        os._exit(code)
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status)


def test_it_is_made_once_however_many_threads_ask_at_once():
    made: list[object] = []
    started = threading.Barrier(8)

    def make() -> object:
        made.append(object())
        return made[-1]

    holder = PerProcess(make)
    assert holder.current() is None  # nothing made by looking

    found: list[object] = []

    def ask() -> None:
        started.wait(WAIT_SECONDS)
        found.append(holder.get())

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_SECONDS)

    assert len(made) == 1
    assert found == made * 8
    assert holder.current() is made[0]


def test_a_taken_object_is_the_callers_and_the_next_get_makes_another():
    holder = PerProcess(object)
    first = holder.get()

    assert holder.take() is first
    assert holder.current() is None
    assert holder.take() is None
    second = holder.get()
    assert second is not first


def test_a_forked_child_makes_its_own_and_the_parent_keeps_its():
    holder = PerProcess(lambda: os.getpid())
    parent = holder.get()

    def child_has_its_own() -> bool:
        # Not the parent's (current sees none here), nor handed back to be closed.
        return holder.current() is None and holder.take() is None and holder.get() == os.getpid()

    assert _in_a_forked_child(child_has_its_own) == 0
    assert holder.get() == parent == os.getpid()


def test_a_child_forked_while_another_thread_makes_the_object_can_make_its_own():
    parent = os.getpid()
    making = threading.Event()
    finish = threading.Event()

    def slow_make() -> int:
        if os.getpid() == parent:
            making.set()
            finish.wait(WAIT_SECONDS)
        return os.getpid()

    holder = PerProcess(slow_make)
    maker = threading.Thread(target=holder.get)
    maker.start()
    assert making.wait(WAIT_SECONDS)  # the parent's maker holds the lock now

    def child_makes_its_own() -> bool:
        # The child's copy of a lock held at the fork is never released: asked in a thread,
        # so that a child stuck on it says so instead of hanging the test.
        found: list[int] = []
        asker = threading.Thread(target=lambda: found.append(holder.get()), daemon=True)
        asker.start()
        asker.join(WAIT_SECONDS)
        return found == [os.getpid()]

    try:
        assert _in_a_forked_child(child_makes_its_own) == 0
    finally:
        finish.set()
        maker.join(WAIT_SECONDS)
    assert holder.current() == parent
