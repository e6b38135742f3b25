"""What the socket's session check costs in this process: ``django.contrib.auth.get_user`` on
the stored session (the check before every write until agents/session_check.py) against
``session_signs_in``, for one signed-in session, in alternating rounds (CPU time).

    .venv/bin/python bench/session_check_cost.py --calls 400 --rounds 6
"""

from __future__ import annotations

import argparse
import functools

import live
from django.conf import settings
from django.test import Client

from agents import session_check
from agents.session_check import session_signs_in


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    live.migrate()
    user = live.make_user("sessioncheck")
    client = Client()
    client.force_login(user)
    session_key = client.cookies[settings.SESSION_COOKIE_NAME].value

    def through_get_user() -> bool:
        # What every session engine other than the database one still goes through.
        return session_check._signs_in_through_get_user(session_key, user.pk)

    def one_statement() -> bool:
        return session_signs_in(session_key=session_key, user_id=user.pk)

    checks = {"auth.get_user": through_get_user, "session_signs_in": one_statement}
    for name, check in checks.items():
        if not check():
            raise SystemExit(f"{name} does not find the session signing the user in")
    rounds = {
        name: functools.partial(live.cpu_ms_per_call, check, args.calls)
        for name, check in checks.items()
    }
    spent = live.alternating_rounds(rounds, args.rounds)
    live.print_medians(f"the session check, CPU ms per call, {args.calls} calls a round:", spent)


if __name__ == "__main__":
    main()
