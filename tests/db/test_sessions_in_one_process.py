"""Two pytest sessions in one process use one test database (``make mutation``: mutmut
learns which tests reach which function in one session, then runs them clean in a second,
in the same process, with ``--reuse-db``).

pytest-django keeps a reused database's name in the settings at a session's end, so the
next session made and used ``test_`` + that name while the process loop's connections
stayed on the first: a run claimed in one database was written to in the other, and every
write was refused as if another worker held the run (tests/conftest.py puts the names back).
And a session stopped inside a transactional test leaves its rows in the reused database, so
each session starts by emptying it.
"""

from __future__ import annotations

import os
import re
import subprocess
from urllib.parse import urlsplit

import pytest
from django.db import connection

from tests.processes import BASE_DIR, GUARDED_PYTHON

PROBE = "tests/db/sessions_in_one_process_probe.py"
TWO_SESSIONS = f"""
import sys, pytest
for _ in range(2):
    code = pytest.main(["-q", "-s", "-p", "no:cacheprovider", "--reuse-db", {PROBE!r}])
    if code:
        sys.exit(int(code))
"""


@pytest.mark.django_db(transaction=True)
def test_a_second_session_in_the_process_uses_the_first_ones_database_and_starts_it_empty(
    make_user,
):
    if connection.vendor != "postgresql":
        pytest.skip("the process loop's own connections exist on PostgreSQL only")
    # Committed, as a session stopped before its test's closing flush leaves it.
    make_user("left-behind")
    # The inner sessions reuse this session's test database, already migrated: pytest-django
    # names it "test_" + the configured name.
    expected = connection.settings_dict["NAME"]
    url = urlsplit(os.environ["DATABASE_URL"])
    database_url = url._replace(path="/" + expected.removeprefix("test_")).geturl()
    result = _python_succeeds(["-c", TWO_SESSIONS], database_url=database_url)
    seen = re.findall(r"database: (\S+) loop: (\S+) users: (\d+)", result.stdout)
    both = (expected, expected, "0")
    assert seen == [both, both], result.stdout[-3000:]


def test_a_session_whose_tests_need_no_database_never_connects_to_one():
    """The engine's tests run with the database's address pointing where nothing listens:
    ``make mutation`` checks the engine's mutants several at a time, which is only sound if
    their sessions neither set up nor empty the one test database."""
    session = ["pytest", "-q", "-p", "no:cacheprovider", "--reuse-db"]
    result = _python_succeeds(
        [*session, "tests/react/test_parser_rules.py"],
        database_url="postgres://postgres@127.0.0.1:9/chatsite_nowhere",
    )
    assert re.search(r"\d+ passed", result.stdout), result.stdout[-3000:]


def _python_succeeds(args: list[str], *, database_url: str) -> subprocess.CompletedProcess[str]:
    """Run this project's Python (outside this session's xdist worker) against
    ``database_url``; it must exit 0."""
    env = {**os.environ, "DATABASE_URL": database_url}
    env.pop("PYTEST_XDIST_WORKER", None)
    result = subprocess.run(
        [*GUARDED_PYTHON, *args],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result
