"""Run by tests/db/test_sessions_in_one_process.py in pytest sessions of its own, never
collected by the suite (the name does not start with ``test_``): it prints which database
this session's test runs against, as Django's connection and the process loop's see it, and
how many users it found there."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from chatsite.server.db import loop_pool
from chatsite.server.loop import run_on_process_loop


@pytest.mark.django_db
def test_print_the_database_both_connections_reach():
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_database()")
        [[name]] = cursor.fetchall()
    [[loop_name]] = run_on_process_loop(loop_pool.fetch_all("SELECT current_database()", {}))
    users = get_user_model().objects.count()
    print(f"database: {name} loop: {loop_name} users: {users}")
