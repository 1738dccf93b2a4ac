"""Database-level integrity of the ledger (DESIGN section 3, "the restricted writer").

Triggers on SQLite and PostgreSQL:

* entry tables (genesis, provenance, transition, label, log leaf, tree head) refuse UPDATE and
  DELETE; ``KeyEpoch`` allows only setting ``revoked_at`` once (from ''), ``Outcome`` only
  setting ``transition`` once (from NULL);
* ``Memory``: content and identity (text, content_sha256, external_id, store, organization,
  created_at) are immutable, rows cannot be deleted; ``live_weight_q``/``live_seq`` change only
  to the values of an existing transition commitment of that memory; ``chain_head`` only from
  NULL to the memory's genesis hash, or to the hash of its latest provenance node;
  ``epistemic_state``/``label_seq`` only to the memory's latest label.

PostgreSQL ``TRUNCATE`` is not covered (row triggers do not fire; the test runner's flush uses
it). SQLite has no TRUNCATE, so its DELETE triggers stand down while the one-row table
``ledger_erase_permit`` holds a row: the test runner writes it before flushing a transactional
test database (tests/conftest.py). Anyone able to write that table could also DROP the
triggers, as a PostgreSQL superuser can disable them: triggers stop mistakes and casual edits;
the signatures, checked by ``ledger_verify`` and the portable verifier, catch the rest.
"""

from django.db import migrations

APPEND_ONLY = ["genesisentry", "provenancenode", "transitioncommitment", "epistemiclabel", "logleaf", "treehead"]
IMMUTABLE_MEMORY = ["id", "organization_id", "store_id", "external_id", "text", "content_sha256", "created_at"]
KEYEPOCH_FIXED = ["id", "organization_id", "number", "public_key", "not_before", "not_after", "endorsement"]
OUTCOME_FIXED = ["id", "organization_id", "receipt_id", "memory_id", "reward_q", "created_at"]


def _same(cols, old="OLD", new="NEW", op="IS"):
    if op == "IS":
        return " AND ".join(f"{new}.{c} IS {old}.{c}" for c in cols)
    return " AND ".join(f"{new}.{c} IS NOT DISTINCT FROM {old}.{c}" for c in cols)


def _memory_condition(op: str) -> str:
    """True when a Memory UPDATE is allowed (``op``: 'IS' on SQLite, 'IS NOT DISTINCT FROM' on PG)."""
    same = (lambda c: f"NEW.{c} IS OLD.{c}") if op == "IS" else (lambda c: f"NEW.{c} IS NOT DISTINCT FROM OLD.{c}")
    differs = (lambda c: f"NEW.{c} IS NOT OLD.{c}") if op == "IS" else (lambda c: f"NEW.{c} IS DISTINCT FROM OLD.{c}")
    immutable = " AND ".join(same(c) for c in IMMUTABLE_MEMORY)
    weight = f"""(NOT ({differs('live_weight_q')} OR {differs('live_seq')} OR {differs('chain_head')}) OR (
        EXISTS (SELECT 1 FROM ledger_transitioncommitment t WHERE t.memory_id = NEW.id AND t.seq = NEW.live_seq
                AND t.new_weight_q = NEW.live_weight_q)
        AND NEW.live_seq = (SELECT MAX(p.seq) FROM ledger_provenancenode p WHERE p.memory_id = NEW.id)
        AND NEW.chain_head = (SELECT p.entry_hash FROM ledger_provenancenode p WHERE p.memory_id = NEW.id
                              AND p.seq = NEW.live_seq)
    ) OR (
        OLD.chain_head IS NULL AND NEW.live_seq = 0 AND NEW.live_weight_q = OLD.live_weight_q
        AND NEW.chain_head = (SELECT g.entry_hash FROM ledger_genesisentry g WHERE g.memory_id = NEW.id
                              AND g.weight_q = NEW.live_weight_q)
    ))"""
    label = f"""(NOT ({differs('epistemic_state')} OR {differs('label_seq')}) OR (
        EXISTS (SELECT 1 FROM ledger_epistemiclabel l WHERE l.memory_id = NEW.id AND l.seq = NEW.label_seq
                AND l.label = NEW.epistemic_state)
        AND NEW.label_seq = (SELECT MAX(l.seq) FROM ledger_epistemiclabel l WHERE l.memory_id = NEW.id)
    ))"""
    return f"({immutable}) AND {weight} AND {label}"


def sqlite_sql() -> tuple[list[str], list[str]]:
    fwd = ["CREATE TABLE IF NOT EXISTS ledger_erase_permit (id INTEGER PRIMARY KEY CHECK (id = 1))"]
    rev = ["DROP TABLE IF EXISTS ledger_erase_permit"]
    guard = "WHEN NOT EXISTS (SELECT 1 FROM ledger_erase_permit)"

    def forbid(table, event, when, message):
        name = f"{table}_no_{event.lower()}"
        fwd.append(f"CREATE TRIGGER {name} BEFORE {event} ON {table} {when} "
                   f"BEGIN SELECT RAISE(ABORT, '{message}'); END")
        rev.append(f"DROP TRIGGER IF EXISTS {name}")

    for model in APPEND_ONLY:
        t = f"ledger_{model}"
        forbid(t, "UPDATE", "", f"{t} is append-only: UPDATE refused")
        forbid(t, "DELETE", guard, f"{t} is append-only: DELETE refused")
    forbid("ledger_keyepoch", "UPDATE",
           f"WHEN NOT (OLD.revoked_at = '' AND NEW.revoked_at <> '' AND {_same(KEYEPOCH_FIXED)})",
           "ledger_keyepoch: only revoked_at may be set, once")
    forbid("ledger_keyepoch", "DELETE", guard, "ledger_keyepoch is append-only: DELETE refused")
    forbid("ledger_outcome", "UPDATE",
           f"WHEN NOT (OLD.transition_id IS NULL AND NEW.transition_id IS NOT NULL AND {_same(OUTCOME_FIXED)})",
           "ledger_outcome: only transition may be set, once")
    forbid("ledger_outcome", "DELETE", guard, "ledger_outcome is append-only: DELETE refused")
    # COALESCE: a comparison with a missing row is NULL, and "WHEN NOT NULL" would not fire.
    forbid("ledger_memory", "UPDATE", f"WHEN NOT COALESCE(({_memory_condition('IS')}), 0)",
           "ledger_memory: content is immutable and live state moves only with a matching signed entry")
    forbid("ledger_memory", "DELETE", guard, "ledger_memory: DELETE refused")
    return fwd, list(reversed(rev))


def postgres_sql() -> tuple[list[str], list[str]]:
    fwd = [
        """CREATE OR REPLACE FUNCTION ledger_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
                USING ERRCODE = 'integrity_constraint_violation';
        END $$""",
        f"""CREATE OR REPLACE FUNCTION ledger_keyepoch_guard() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'UPDATE' AND OLD.revoked_at = '' AND NEW.revoked_at <> ''
               AND {_same(KEYEPOCH_FIXED, op='PG')} THEN RETURN NEW; END IF;
            RAISE EXCEPTION 'ledger_keyepoch: only revoked_at may be set, once (% refused)', TG_OP
                USING ERRCODE = 'integrity_constraint_violation';
        END $$""",
        f"""CREATE OR REPLACE FUNCTION ledger_outcome_guard() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'UPDATE' AND OLD.transition_id IS NULL AND NEW.transition_id IS NOT NULL
               AND {_same(OUTCOME_FIXED, op='PG')} THEN RETURN NEW; END IF;
            RAISE EXCEPTION 'ledger_outcome: only transition may be set, once (% refused)', TG_OP
                USING ERRCODE = 'integrity_constraint_violation';
        END $$""",
        f"""CREATE OR REPLACE FUNCTION ledger_memory_guard() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'UPDATE' AND COALESCE(({_memory_condition('PG')}), false) THEN RETURN NEW; END IF;
            RAISE EXCEPTION 'ledger_memory: content is immutable and live state moves only with a matching '
                'signed entry (% refused)', TG_OP USING ERRCODE = 'integrity_constraint_violation';
        END $$""",
    ]
    rev = ["DROP FUNCTION IF EXISTS ledger_refuse()", "DROP FUNCTION IF EXISTS ledger_keyepoch_guard()",
           "DROP FUNCTION IF EXISTS ledger_outcome_guard()", "DROP FUNCTION IF EXISTS ledger_memory_guard()"]
    triggers = [(f"ledger_{m}", "ledger_refuse") for m in APPEND_ONLY] + [
        ("ledger_keyepoch", "ledger_keyepoch_guard"), ("ledger_outcome", "ledger_outcome_guard"),
        ("ledger_memory", "ledger_memory_guard")]
    for table, fn in triggers:
        fwd.append(f"CREATE TRIGGER {table}_guard BEFORE UPDATE OR DELETE ON {table} "
                   f"FOR EACH ROW EXECUTE FUNCTION {fn}()")
        rev.insert(0, f"DROP TRIGGER IF EXISTS {table}_guard ON {table}")
    return fwd, rev


def forwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        sql = sqlite_sql()[0]
    elif vendor == "postgresql":
        sql = postgres_sql()[0]
    else:
        raise NotImplementedError(f"ledger triggers exist for SQLite and PostgreSQL, not {vendor}")
    for statement in sql:
        schema_editor.execute(statement, params=None)


def backwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    sql = sqlite_sql()[1] if vendor == "sqlite" else postgres_sql()[1] if vendor == "postgresql" else []
    for statement in sql:
        schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [("ledger", "0001_initial")]  # noqa: RUF012 (Django reads class attributes)

    operations = [migrations.RunPython(forwards, backwards)]  # noqa: RUF012
