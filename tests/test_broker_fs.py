"""The embedded broker (kombu's filesystem transport) writes each message atomically: a worker
listing the queue folder never finds a message file before its content (it did: the consumer
died on an empty file, ``JSONDecodeError``, and the import waiting on it never finished)."""

from __future__ import annotations

import os
import uuid

from kombu import Connection

from memaudit_site import broker_fs


def _connection(tmp_path):
    queue, control = tmp_path / "queue", tmp_path / "control"
    queue.mkdir()
    control.mkdir()
    return Connection("filesystem://", transport_options={
        "data_folder_in": str(queue), "data_folder_out": str(queue), "control_folder": str(control),
        "store_processed": False}), queue


def test_the_celery_app_uses_the_atomic_transport():
    from memaudit_site.celery import app

    with app.connection_for_write() as conn:
        if conn.transport_cls != "filesystem":  # the PostgreSQL + Redis run uses Redis
            return
        assert isinstance(conn.transport, broker_fs.Transport)


def test_a_message_appears_under_its_queue_name_only_when_written_whole(tmp_path, monkeypatch):
    # The channel's own put and get, not a SimpleQueue: kombu keeps exchange bindings in a
    # process-wide state, so a queue name another test bound to another folder would be
    # "already bound" here and its message dropped before any put.
    conn, folder = _connection(tmp_path)
    seen_before_rename: list[list[str]] = []
    real_replace = os.replace

    def replace(src, dst):
        seen_before_rename.append(sorted(os.listdir(folder)))
        assert os.path.getsize(src) > 0
        return real_replace(src, dst)

    monkeypatch.setattr(broker_fs.os, "replace", replace)
    with conn:
        channel = conn.default_channel
        assert isinstance(channel, broker_fs.Channel)
        channel._put("housekeeper", {"task": "x", "args": [1, 2, 3]})
        # before the rename only a hidden temporary file was there, which no queue matches
        assert len(seen_before_rename) == 1
        assert all(name.startswith(".") and name.endswith(".tmp") for name in seen_before_rename[0])
        assert [n.endswith(".housekeeper.msg") for n in os.listdir(folder)] == [True]
        assert channel._get("housekeeper") == {"task": "x", "args": [1, 2, 3]}
    assert os.listdir(folder) == []


def test_a_queued_message_reaches_its_consumer(tmp_path):
    conn, folder = _connection(tmp_path)
    name = f"broker-fs-{uuid.uuid4().hex}"  # bound nowhere else in this process (see above)
    with conn:
        q = conn.SimpleQueue(name)
        q.put({"task": "y"})
        message = q.get(timeout=1)
        assert message.payload == {"task": "y"}
        message.ack()
        q.close()
    assert os.listdir(folder) == []
