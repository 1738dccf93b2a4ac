"""16 processes appending transitions to one memory on PostgreSQL yield one unbroken chain."""

from __future__ import annotations

import multiprocessing

import pytest
from django.conf import settings
from django.db import connections

from ledger.models import Memory, ProvenanceNode, TransitionCommitment
from ledger.verification import memory_verify, organization_verify

PROCESSES = 16
APPENDS = 5

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.skipif(settings.DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql",
                       reason="needs PostgreSQL (DATABASE_URL=postgres://...)"),
]


def _appender(memory_id: int, worker: int, barrier, errors) -> None:
    from ledger.services import transition_append

    connections["default"].close()  # never share the parent's socket
    barrier.wait()
    try:
        for i in range(APPENDS):
            transition_append(memory_id=memory_id, valence_q=1 if (worker + i) % 2 else -1,
                              evidence=[f"w{worker}:{i}"])
    except Exception as exc:  # noqa: BLE001 (reported to the parent, which fails the test)
        errors.put(f"worker {worker}: {exc!r}")
    finally:
        connections.close_all()


@pytest.mark.django_db(transaction=True)
def test_sixteen_processes_append_to_one_memory_without_fork_or_loss(memories, organization):
    memory = memories[0]
    connections.close_all()
    ctx = multiprocessing.get_context("fork")  # children inherit settings (test DB name, key dirs, role)
    barrier, errors = ctx.Barrier(PROCESSES), ctx.Queue()
    procs = [ctx.Process(target=_appender, args=(memory.pk, w, barrier, errors)) for w in range(PROCESSES)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * PROCESSES
    assert errors.empty(), errors.get()
    total = PROCESSES * APPENDS
    memory = Memory.objects.select_related("store", "organization").get(pk=memory.pk)
    assert memory.live_seq == total
    assert list(ProvenanceNode.objects.filter(memory=memory).order_by("seq").values_list("seq", flat=True)) == \
        list(range(1, total + 1))
    assert TransitionCommitment.objects.filter(memory=memory).count() == total
    evidence = {e for ev in ProvenanceNode.objects.filter(memory=memory).values_list("evidence", flat=True) for e in ev}
    assert len(evidence) == total  # no lost append
    assert memory_verify(memory) == []
    assert organization_verify(organization) == []
