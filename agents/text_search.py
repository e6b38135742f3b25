"""Full-text search on PostgreSQL, the one rule the knowledge base and attachments share.

Every word of the query first (``websearch`` syntax, so quotes and ``-word`` work); when
that finds nothing, any of its words. Rows come back best first, the rank as their last
field. SQLite's FTS5 search is in ``agents/db/statements.py``.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import QuerySet


def search_language() -> str:
    """The text search configuration (stemming, stop words) of both searches."""
    return str(getattr(settings, "KNOWLEDGE_SEARCH_LANGUAGE", "english"))


def ranked_matches(
    rows: QuerySet[Any],
    *,
    vector: Any,
    query: str,
    terms: list[str],
    order_by: tuple[str, ...],
    fields: tuple[str, ...],
    limit: int,
) -> list[tuple[Any, ...]]:
    """``fields`` and the rank of the ``rows`` whose ``vector`` (a ``SearchVector`` in
    ``search_language()``) matches ``query``, at most ``limit``; ties in ``order_by``."""
    from django.contrib.postgres.search import SearchQuery, SearchRank

    language = search_language()
    searched = rows.annotate(search=vector)
    every_word = SearchQuery(query, search_type="websearch", config=language)
    any_word = SearchQuery(terms[0], config=language)
    for term in terms[1:]:
        any_word |= SearchQuery(term, config=language)
    for search_query in (every_word, any_word):
        found = list(
            searched.filter(search=search_query)
            .annotate(rank=SearchRank(vector, search_query))
            .order_by("-rank", *order_by)
            .values_list(*fields, "rank")[:limit]
        )
        if found:
            return found
    return []
