"""The broker transport (chatsite/server/patches/kombu.py): one Redis client per channel,
messages unchanged."""

from __future__ import annotations

import uuid

import pytest
from kombu import simple

from chatsite.celery import app
from chatsite.server.patches import kombu as broker


def test_celery_publishes_and_consumes_through_this_transport():
    queue_name = f"test-broker-{uuid.uuid4().hex}"
    with app.connection_for_write() as connection:
        assert isinstance(connection.transport, broker.Transport)
        queue = simple.SimpleQueue(connection, queue_name)
        try:
            for n in range(3):
                queue.put({"n": n})
            received, tags = [], []
            for _ in range(3):
                message = queue.get(timeout=5)
                received.append(message.payload["n"])
                tags.append(message.delivery_tag)
                message.ack()
            assert received == [0, 1, 2]
            with pytest.raises(queue.Empty):
                queue.get_nowait()
            # Every delivery was acked: none is left for kombu to restore.
            channel = connection.default_channel
            assert not any(channel.client.hexists(channel.unacked_key, tag) for tag in tags)
        finally:
            queue.queue.delete()
            queue.close()


def test_a_channel_builds_one_client_and_a_new_one_for_a_new_pool():
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        with channel.conn_or_acquire() as first, channel.conn_or_acquire() as second:
            assert first is second
            assert first.connection_pool is channel.pool
        given = object()
        with channel.conn_or_acquire(given) as client:
            assert client is given

        channel._disconnect_pools()  # as kombu does when the connection is lost
        with channel.conn_or_acquire() as third:
            assert third is not first
            assert third.connection_pool is channel.pool
            assert third.ping()
