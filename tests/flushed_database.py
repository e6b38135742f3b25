"""Long-lived test processes and a database that is flushed under them.

The worker and daphne the suite starts live for the whole session, while every
``transaction=True`` test ends with a flush that deletes the content types and creates them
again under new ids. Django caches content types per process (``ContentType.objects``), so
a daphne that cached one before a flush would write the admin's log with an id that no
longer exists (a ForeignKeyViolation, a 500 on the next admin save). Production never
flushes, so the cache stays on there; in the suite's processes it is cleared as each
request starts.
"""

from __future__ import annotations

from typing import Any


def forget_content_types_per_request() -> None:
    from django.core.signals import request_started

    def clear(**_: Any) -> None:
        from django.contrib.contenttypes.models import ContentType

        ContentType.objects.clear_cache()

    request_started.connect(clear, weak=False, dispatch_uid="tests-forget-content-types")
