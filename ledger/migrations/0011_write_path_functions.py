"""Cheaper server-side halves of the warm append (PostgreSQL; SQLite keeps 0002's triggers and
takes the locked path). Measured in ``docs/benchmarks.md`` section 11, "Ledger".

**``ledger_memory_guard()``** as steps that run only the lookups an UPDATE needs. The 0002
guard evaluated its whole condition as one expression: PL/pgSQL ran it as one query whose plan
holds seven sub-plans (the transition, the latest node twice, the genesis, the label twice), and
the executor set up every one of them on each memory UPDATE, also those of the branches the row
never reached. This version accepts exactly the same updates: the content and identity columns
unchanged (``IMMUTABLE_MEMORY`` of 0002), and

* the weight state (``live_weight_q``, ``live_seq``, ``chain_head``) unchanged, or moved to a
  transition commitment of the memory with that seq and weight while ``live_seq`` is the
  memory's latest provenance node and ``chain_head`` that node's hash (one backward index
  scan: the node with the highest seq, whose seq and hash must both match, is the same test as
  "``live_seq`` = MAX(seq) and ``chain_head`` = the hash of the node at ``live_seq``", seqs
  being unique per memory), or set from NULL, at seq 0 and the old weight, to the hash of the
  memory's genesis with that weight;
* the label state (``epistemic_state``, ``label_seq``) unchanged, or moved to the memory's
  latest label with that seq and value.

Each comparison with a missing row is NULL and counts as "no", as ``COALESCE(..., false)`` made
it count in 0002; a DELETE is refused as before.

**``ledger_append_transitions(...)``** (0010) plans its statements once per session
(``plan_cache_mode = force_generic_plan``, set on the function only). Its statements take the
arrays as parameters, and PostgreSQL's plan cache kept choosing a custom plan for them, so
every call planned each statement again: a CPU profile of the backend (``perf record -e
cpu-clock``) put planning at 18 % of the server's CPU per warm append. The generic plans use
the same indexes (the memories' and the organization's primary keys, the key epochs by
organization, the log by organization and index; the memory lock reads the primary key as a
bitmap scan); the function body, its checks and its writes are 0010's unchanged.
"""

import importlib

from django.db import migrations

_0002 = importlib.import_module("ledger.migrations.0002_triggers")
_IMMUTABLE = " AND ".join(f"NEW.{c} IS NOT DISTINCT FROM OLD.{c}" for c in _0002.IMMUTABLE_MEMORY)

GUARD = f"""
CREATE OR REPLACE FUNCTION ledger_memory_guard() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ok boolean := false;
    top_seq integer;
    top_hash bytea;
BEGIN
    IF TG_OP = 'UPDATE' AND COALESCE({_IMMUTABLE}, false) THEN
        ok := true;
        IF NEW.live_weight_q IS DISTINCT FROM OLD.live_weight_q OR NEW.live_seq IS DISTINCT FROM OLD.live_seq
           OR NEW.chain_head IS DISTINCT FROM OLD.chain_head THEN
            ok := EXISTS (SELECT 1 FROM ledger_transitioncommitment t WHERE t.memory_id = NEW.id
                          AND t.seq = NEW.live_seq AND t.new_weight_q = NEW.live_weight_q);
            IF ok THEN
                SELECT p.seq, p.entry_hash INTO top_seq, top_hash FROM ledger_provenancenode p
                 WHERE p.memory_id = NEW.id ORDER BY p.seq DESC LIMIT 1;
                ok := COALESCE(NEW.live_seq = top_seq AND NEW.chain_head = top_hash, false);
            END IF;
            IF NOT ok AND OLD.chain_head IS NULL THEN
                ok := COALESCE(NEW.live_seq = 0 AND NEW.live_weight_q = OLD.live_weight_q
                               AND NEW.chain_head = (SELECT g.entry_hash FROM ledger_genesisentry g
                                                      WHERE g.memory_id = NEW.id AND g.weight_q = NEW.live_weight_q),
                               false);
            END IF;
        END IF;
        IF ok AND (NEW.epistemic_state IS DISTINCT FROM OLD.epistemic_state
                   OR NEW.label_seq IS DISTINCT FROM OLD.label_seq) THEN
            ok := COALESCE(EXISTS (SELECT 1 FROM ledger_epistemiclabel l WHERE l.memory_id = NEW.id
                                   AND l.seq = NEW.label_seq AND l.label = NEW.epistemic_state)
                           AND NEW.label_seq = (SELECT MAX(l.seq) FROM ledger_epistemiclabel l
                                                 WHERE l.memory_id = NEW.id), false);
        END IF;
    END IF;
    IF ok THEN RETURN NEW; END IF;
    RAISE EXCEPTION 'ledger_memory: content is immutable and live state moves only with a matching '
        'signed entry (% refused)', TG_OP USING ERRCODE = 'integrity_constraint_violation';
END $$
"""


GENERIC = "ALTER FUNCTION ledger_append_transitions SET plan_cache_mode = force_generic_plan"
CUSTOM = "ALTER FUNCTION ledger_append_transitions RESET plan_cache_mode"


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for sql in (GUARD, GENERIC):
            schema_editor.execute(sql, params=None)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        fwd = _0002.postgres_sql()[0]
        schema_editor.execute(next(s for s in fwd if "FUNCTION ledger_memory_guard()" in s), params=None)
        schema_editor.execute(CUSTOM, params=None)


class Migration(migrations.Migration):
    dependencies = [("ledger", "0010_append_transitions_function")]  # noqa: RUF012 (Django reads class attributes)

    operations = [migrations.RunPython(forwards, backwards)]  # noqa: RUF012
