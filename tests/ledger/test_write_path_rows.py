"""The rows the write path returns are the instances the ORM would build (runs on SQLite and
PostgreSQL): built without ``Model.__init__`` when the model has no init receivers, through
``Model.from_db`` (receivers called) when it has."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.models.signals import post_init

from ledger import services
from ledger.models import EpistemicLabel, ProvenanceNode

pytestmark = pytest.mark.django_db(transaction=True)


def _fields(obj) -> dict:
    return {f.attname: getattr(obj, f.attname) for f in type(obj)._meta.concrete_fields}


def _same_as_read_back(obj) -> None:
    stored = type(obj).objects.get(pk=obj.pk)
    got, want = _fields(obj), _fields(stored)
    # bytes columns come back from the database as bytes or memoryview, depending on the backend
    assert {k: bytes(v) if isinstance(v, memoryview) else v for k, v in got.items()} \
        == {k: bytes(v) if isinstance(v, memoryview) else v for k, v in want.items()}
    assert obj._state.adding is False and obj._state.db == connection.alias
    assert obj == stored and hash(obj) == hash(stored)


def test_appended_rows_equal_the_rows_read_back(memories):
    m = memories[0]
    node = services.transition_append(memory_id=m.pk, valence_q=250, evidence=["o:1"])  # locked path
    again = services.transition_append(memory_id=m.pk, valence_q=-250, evidence=["o:2"])  # warm path on PostgreSQL
    batch = services.transitions_append(items=[{"memory_id": m.pk, "valence_q": 100, "evidence": ["o:3"]},
                                              {"memory_id": memories[1].pk, "valence_q": 100, "evidence": []}])
    label = services.label_append(memory_id=m.pk, label="poison_suspect", reason="r", evidence={"k": 1},
                                  actor="user:a")
    for obj in (node, again, *batch, label):
        _same_as_read_back(obj)
    assert isinstance(label, EpistemicLabel) and [n.seq for n in batch] == [3, 1]
    node.refresh_from_db()  # an ordinary model instance
    assert node.memory == m


def test_a_model_with_an_init_receiver_is_built_by_from_db(memories):
    seen = []

    def receiver(sender, instance, **kwargs):
        seen.append(instance)

    post_init.connect(receiver, sender=ProvenanceNode)
    try:
        services.transition_append(memory_id=memories[0].pk, valence_q=100, evidence=["cold"])
        seen.clear()
        node = services.transition_append(memory_id=memories[0].pk, valence_q=100, evidence=["warm"])
    finally:
        post_init.disconnect(receiver, sender=ProvenanceNode)
    assert node in seen and any(s is node for s in seen)
    _same_as_read_back(node)
