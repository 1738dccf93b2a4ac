"""``ledger_expect(ok, what)``: the check of the one-round-trip append (``ledger.services``).

An append whose chain tips the process already holds is sent as one multi-statement query that
runs as one implicit transaction: its first statement locks the memory rows and calls this
function with "the tips and key epochs are still the ones the entries were signed against";
when they are not, it raises (SQLSTATE ``LA001``), the whole query rolls back, and the service
takes the locked read-then-write path. The triggers of 0002 still check every row it writes.
PostgreSQL only (SQLite takes the locked path).
"""

from django.db import migrations

FORWARD = """
CREATE OR REPLACE FUNCTION ledger_expect(ok boolean, what text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF ok IS NOT TRUE THEN
        RAISE EXCEPTION 'ledger append: % moved since the entries were signed', what USING ERRCODE = 'LA001';
    END IF;
    RETURN true;
END $$
"""
BACKWARD = "DROP FUNCTION IF EXISTS ledger_expect(boolean, text)"


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FORWARD, params=None)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(BACKWARD, params=None)


class Migration(migrations.Migration):
    dependencies = [("ledger", "0008_importers_importjob_format")]  # noqa: RUF012 (Django reads class attributes)

    operations = [migrations.RunPython(forwards, backwards)]  # noqa: RUF012
