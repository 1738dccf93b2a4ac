"""``ledger_append_transitions(batch jsonb)``: the warm append's call with one parameter.

The 0010 function takes 37 parameters, one PostgreSQL array literal per column; the client
wrote each literal in Python (a join, an escape pass and an encode per column), which was about
a fifth of the Python an append spent besides its signatures. This overload takes the same
values as one JSON document, which the client writes with one call of the C JSON encoder:

    {"org": 7, "e": [n, max_id, revoked_n, revoked_max, newest_hex],
     "m": [[id, seq, head_hex, weight, label_seq, new_seq, new_head_hex, new_weight], ...],
     "n": [[memory, seq, prev_weight, new_weight, valence, eta, evidence, prev_hex, epoch, time,
            signature_hex, hash_hex], ...],
     "t": [[memory, seq, new_weight, provenance_hex, epoch, time, signature_hex], ...],
     "l": [[memory, kind, seq, leaf_hash_hex], ...]}

(``evidence`` is the node's evidence as a JSON value; bytes are lowercase hex). Its body is
0010's, statement for statement: the memories become 0010's arrays first (a few rows; the
statements joining them with ``ledger_memory`` are then planned as 0010's), and each ``unnest``
of the nodes', commitments' and leaves' arrays is replaced by the rows of the document
(``jsonb_array_elements ... WITH ORDINALITY``, in their order): 1. lock the memory rows
(by id) and require their tips and organization; 2. require the key-epoch marks (either check
raises ``LA001``); 3. lock the organization row; 4. insert the nodes and commitments; 5. append
the log leaves after the last index; 6. move each memory's live state. The 0002/0011 triggers
still check every row it writes. A value of the wrong type (text for a number, bad hex) raises
and the whole call rolls back. (A first version turned the document into 0010's arrays and
called 0010: it cost the server 40 % more per batched transition than 0010 itself.) Plans are generic for the session, as
0011 set for 0010. The 0010 signature stays: processes of the previous release call it during
a rolling upgrade. PostgreSQL only (SQLite takes the locked path).
"""

from django.db import migrations

FORWARD = """
CREATE OR REPLACE FUNCTION ledger_append_transitions(batch jsonb) RETURNS bigint[] LANGUAGE plpgsql AS $$
DECLARE
    org bigint := (batch->>'org')::bigint;
    e_n bigint := (batch->'e'->>0)::bigint;
    e_max_id bigint := (batch->'e'->>1)::bigint;
    e_revoked_n bigint := (batch->'e'->>2)::bigint;
    e_revoked_max text := batch->'e'->>3;
    e_newest bytea := decode(batch->'e'->>4, 'hex');
    m_id bigint[]; m_seq integer[]; m_head bytea[]; m_weight integer[]; m_label_seq integer[];
    m_new_seq integer[]; m_new_head bytea[]; m_new_weight integer[];
    ok boolean;
    base bigint;
    ids bigint[];
BEGIN
    -- The memories (one row each, a few) as 0010's arrays: the statements that join them with
    -- ledger_memory are then 0010's, planned as 0010's are (index scans by id).
    SELECT array_agg((r->>0)::bigint), array_agg((r->>1)::integer), array_agg(decode(r->>2, 'hex')),
           array_agg((r->>3)::integer), array_agg((r->>4)::integer), array_agg((r->>5)::integer),
           array_agg(decode(r->>6, 'hex')), array_agg((r->>7)::integer)
      INTO m_id, m_seq, m_head, m_weight, m_label_seq, m_new_seq, m_new_head, m_new_weight
      FROM jsonb_array_elements(batch->'m') AS x(r);
    SELECT COUNT(*) = cardinality(m_id) AND COALESCE(BOOL_AND(
               m.organization_id = org AND m.live_seq = v.seq AND m.chain_head = v.head
               AND m.live_weight_q = v.w AND m.label_seq = v.l), false)
      INTO ok
      FROM (SELECT id, organization_id, live_seq, chain_head, live_weight_q, label_seq FROM ledger_memory
             WHERE id = ANY(m_id) ORDER BY id FOR UPDATE) m
      JOIN unnest(m_id, m_seq, m_head, m_weight, m_label_seq) AS v(id, seq, head, w, l) ON v.id = m.id;
    PERFORM ledger_expect(ok, 'a chain tip');
    SELECT COUNT(*) = e_n AND MAX(e.id) IS NOT DISTINCT FROM e_max_id
           AND SUM(CASE WHEN e.revoked_at <> '' THEN 1 ELSE 0 END) IS NOT DISTINCT FROM e_revoked_n
           AND MAX(e.revoked_at) IS NOT DISTINCT FROM e_revoked_max
           AND (SELECT n.public_key FROM ledger_keyepoch n WHERE n.organization_id = org
                 ORDER BY n.id DESC LIMIT 1) IS NOT DISTINCT FROM e_newest
      INTO ok
      FROM ledger_keyepoch e WHERE e.organization_id = org;
    PERFORM ledger_expect(ok, 'the key epochs');
    PERFORM 1 FROM orgs_organization WHERE id = org FOR UPDATE;
    WITH ins AS (
        INSERT INTO ledger_provenancenode (organization_id, memory_id, seq, prev_weight_q, new_weight_q,
                                           valence_q, eta_q, evidence, prev, epoch, time, signature, entry_hash)
        SELECT org, (r->>0)::bigint, (r->>1)::integer, (r->>2)::integer, (r->>3)::integer, (r->>4)::integer,
               (r->>5)::integer, r->6, decode(r->>7, 'hex'), (r->>8)::integer, r->>9, decode(r->>10, 'hex'),
               decode(r->>11, 'hex')
          FROM jsonb_array_elements(batch->'n') WITH ORDINALITY AS x(r, ord)
         ORDER BY ord
        RETURNING id, memory_id, seq)
    SELECT array_agg(ins.id ORDER BY u.ord) INTO ids
      FROM ins JOIN (SELECT (r->>0)::bigint, (r->>1)::integer, ord
                       FROM jsonb_array_elements(batch->'n') WITH ORDINALITY AS x(r, ord)) AS u(memory, seq, ord)
        ON ins.memory_id = u.memory AND ins.seq = u.seq;
    INSERT INTO ledger_transitioncommitment (organization_id, memory_id, seq, new_weight_q, provenance_hash,
                                             epoch, time, signature)
    SELECT org, (r->>0)::bigint, (r->>1)::integer, (r->>2)::integer, decode(r->>3, 'hex'), (r->>4)::integer,
           r->>5, decode(r->>6, 'hex')
      FROM jsonb_array_elements(batch->'t') WITH ORDINALITY AS x(r, ord)
     ORDER BY ord;
    SELECT COALESCE(MAX(index) + 1, 0) INTO base FROM ledger_logleaf WHERE organization_id = org;
    INSERT INTO ledger_logleaf (organization_id, index, memory_id, kind, seq, leaf_hash)
    SELECT org, base + ord - 1, (r->>0)::bigint, r->>1, (r->>2)::integer, decode(r->>3, 'hex')
      FROM jsonb_array_elements(batch->'l') WITH ORDINALITY AS x(r, ord)
     ORDER BY ord;
    UPDATE ledger_memory m SET live_seq = v.seq, live_weight_q = v.w, chain_head = v.head
      FROM unnest(m_id, m_new_seq, m_new_head, m_new_weight) AS v(id, seq, head, w)
     WHERE m.id = v.id;
    RETURN ids;
END $$
"""
GENERIC = "ALTER FUNCTION ledger_append_transitions(jsonb) SET plan_cache_mode = force_generic_plan"
BACKWARD = "DROP FUNCTION IF EXISTS ledger_append_transitions(jsonb)"


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        for sql in (FORWARD, GENERIC):
            schema_editor.execute(sql, params=None)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(BACKWARD, params=None)


class Migration(migrations.Migration):
    dependencies = [("ledger", "0011_write_path_functions")]  # noqa: RUF012 (Django reads class attributes)

    operations = [migrations.RunPython(forwards, backwards)]  # noqa: RUF012
