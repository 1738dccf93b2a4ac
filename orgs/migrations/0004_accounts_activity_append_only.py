"""The activity trail is append-only in the database too (as the ledger is, ledger 0002).

UPDATE and DELETE on ``orgs_activityevent`` are refused by a trigger on SQLite and PostgreSQL,
with one exception: deleting a user sets ``actor_id`` to NULL (the FK's SET_NULL), which must
keep working, so an UPDATE that changes nothing but ``actor_id`` to NULL passes. SQLite's DELETE
trigger stands down while ``ledger_erase_permit`` holds a row, as the ledger's do (the test
runner's flush); PostgreSQL's flush uses TRUNCATE, which row triggers do not see.
"""

from django.db import migrations

TABLE = "orgs_activityevent"
FIXED = ["id", "organization_id", "actor_label", "verb", "target", "detail", "ip", "ledger_ref", "created_at"]


def _same(op: str) -> str:
    return " AND ".join(f"NEW.{c} {op} OLD.{c}" for c in FIXED)


def sqlite_sql() -> tuple[list[str], list[str]]:
    fwd = [
        f"CREATE TRIGGER {TABLE}_no_update BEFORE UPDATE ON {TABLE} "
        f"WHEN NOT (NEW.actor_id IS NULL AND {_same('IS')}) "
        f"BEGIN SELECT RAISE(ABORT, '{TABLE} is append-only: UPDATE refused'); END",
        f"CREATE TRIGGER {TABLE}_no_delete BEFORE DELETE ON {TABLE} "
        f"WHEN NOT EXISTS (SELECT 1 FROM ledger_erase_permit) "
        f"BEGIN SELECT RAISE(ABORT, '{TABLE} is append-only: DELETE refused'); END",
    ]
    rev = [f"DROP TRIGGER IF EXISTS {TABLE}_no_update", f"DROP TRIGGER IF EXISTS {TABLE}_no_delete"]
    return fwd, rev


def postgres_sql() -> tuple[list[str], list[str]]:
    fwd = [
        f"""CREATE OR REPLACE FUNCTION orgs_activity_guard() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF TG_OP = 'UPDATE' AND NEW.actor_id IS NULL AND {_same('IS NOT DISTINCT FROM')} THEN
                RETURN NEW;
            END IF;
            RAISE EXCEPTION '{TABLE} is append-only: % refused', TG_OP
                USING ERRCODE = 'integrity_constraint_violation';
        END $$""",
        f"CREATE TRIGGER {TABLE}_guard BEFORE UPDATE OR DELETE ON {TABLE} "
        f"FOR EACH ROW EXECUTE FUNCTION orgs_activity_guard()",
    ]
    rev = [f"DROP TRIGGER IF EXISTS {TABLE}_guard ON {TABLE}", "DROP FUNCTION IF EXISTS orgs_activity_guard()"]
    return fwd, rev


def forwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "sqlite":
        sql = sqlite_sql()[0]
    elif vendor == "postgresql":
        sql = postgres_sql()[0]
    else:
        raise NotImplementedError(f"activity triggers exist for SQLite and PostgreSQL, not {vendor}")
    for statement in sql:
        schema_editor.execute(statement, params=None)


def backwards(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    sql = sqlite_sql()[1] if vendor == "sqlite" else postgres_sql()[1] if vendor == "postgresql" else []
    for statement in sql:
        schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    # ledger 0002 creates ledger_erase_permit, which the SQLite DELETE trigger reads.
    dependencies = [("orgs", "0003_accounts_invitation"), ("ledger", "0002_triggers")]  # noqa: RUF012

    operations = [migrations.RunPython(forwards, backwards)]  # noqa: RUF012
