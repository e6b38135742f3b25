"""``manage.py evaluate <set> --version N``: run an evaluation set against one version of
its profile (agents/services/evaluations.py) and print each case's report.

The cases run as replays on the Celery workers, as from the admin; the command waits for
them (``--no-wait``: it only starts them) and ends with a non-zero code when a case fails.
``<set>`` is the set's id or its name; ``N`` a version number of the set's profile; the
tokens are those of ``--user`` (by default the first active superuser).
"""

from __future__ import annotations

import time
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents.models import EvalRun, EvalSet
from agents.services.evaluations import EvalRefused, eval_run_start


class Command(BaseCommand):
    help = "Run an evaluation set against a prompt version of its profile and report."

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        # ``--version`` is the prompt version's number here, not Django's version.
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("eval_set", help="the set's id or name")
        parser.add_argument("--version", type=int, required=True, help="the version's number")
        parser.add_argument("--user", help="whose tokens (default: the first superuser)")
        parser.add_argument("--no-wait", action="store_true", help="start it and return")
        parser.add_argument(
            "--timeout", type=float, default=1800.0, help="seconds to wait for the report"
        )

    def handle(self, *args: object, **options: object) -> None:
        eval_set = self._set(str(options["eval_set"]))
        number = int(str(options["version"]))
        version = eval_set.profile.versions.filter(number=number).first()
        if version is None:
            raise CommandError(f"{eval_set.profile.slug} has no version {number}.")
        users = get_user_model().objects.filter(is_active=True)
        if options["user"]:
            user = users.filter(username=options["user"]).first()
        else:
            user = users.filter(is_superuser=True).order_by("pk").first()
        if user is None:
            raise CommandError("No such active user; name one with --user.")
        try:
            eval_run = eval_run_start(eval_set=eval_set, version=version, user=user)
        except EvalRefused as refused:
            raise CommandError(str(refused)) from None
        self.stdout.write(f"Evaluation {eval_run.pk}: {eval_set} against {version}")
        if options["no_wait"]:
            return
        deadline = time.monotonic() + float(str(options["timeout"]))
        while eval_run.status != EvalRun.Status.DONE:
            if time.monotonic() > deadline:
                raise CommandError(f"Evaluation {eval_run.pk} did not end in time.")
            time.sleep(0.5)
            eval_run.refresh_from_db()
        for result in eval_run.results.select_related("case").order_by("case_id"):
            verdict = "PASS" if result.passed else "FAIL"
            self.stdout.write(f"{verdict}  {result.case.name}  ({result.tokens} tokens)")
            for check in result.checks:
                mark = "ok  " if check["passed"] else "FAIL"
                detail = (
                    f"  [{check['detail']}]" if check.get("detail") and not check["passed"] else ""
                )
                self.stdout.write(f"    {mark} {check['expectation']}{detail}")
        self.stdout.write(f"{eval_run.passed} of {eval_run.cases} passed")
        if eval_run.passed < eval_run.cases:
            raise CommandError("Some cases failed.", returncode=1)

    def _set(self, name: str) -> EvalSet:
        sets = EvalSet.objects.select_related("profile")
        found = sets.filter(pk=int(name)).first() if name.isdigit() else None
        found = found or sets.filter(name=name).first()
        if found is None:
            raise CommandError(f"No evaluation set {name!r}.")
        return found
