"""``ledger_append_transitions(...)``: the warm transition append as one server-side function.

The one-round-trip append (``ledger.services.sql``) used to send its checks and writes as a
multi-statement text query: PostgreSQL parsed and planned seven statements per append, and the
client bound every value into SQL text. This function takes one array per column instead, is
called through a statement prepared once per connection, and its statements' plans are cached
by PL/pgSQL for the session. It does, in one implicit transaction, what the text query did:

1. lock the memory rows (by id) and require their tips (``live_seq``, ``chain_head``,
   ``live_weight_q``, ``label_seq``) and organization to equal what the entries were signed and
   verified against; 2. require the organization's key-epoch marks (``ledger.services.keys``)
   to be unchanged; either check raises ``LA001`` through ``ledger_expect`` (0009) and the
   whole call rolls back; 3. lock the organization row (serializes its log); 4. insert the
   provenance nodes and transition commitments; 5. append the log leaves after the last index;
   6. move each memory's live state. The triggers of 0002 still check every row it writes.

Returns the ids of the inserted provenance nodes in the order of the ``n_*`` arrays.
PostgreSQL only (SQLite takes the locked path).
"""

from django.db import migrations

FORWARD = """
CREATE OR REPLACE FUNCTION ledger_append_transitions(
    org bigint, e_n bigint, e_max_id bigint, e_revoked_n bigint, e_revoked_max text, e_newest bytea,
    m_id bigint[], m_seq integer[], m_head bytea[], m_weight integer[], m_label_seq integer[],
    m_new_seq integer[], m_new_head bytea[], m_new_weight integer[],
    n_memory bigint[], n_seq integer[], n_prev_weight integer[], n_new_weight integer[],
    n_valence integer[], n_eta integer[], n_evidence text[], n_prev bytea[], n_epoch integer[],
    n_time text[], n_signature bytea[], n_hash bytea[],
    t_memory bigint[], t_seq integer[], t_new_weight integer[], t_provenance bytea[], t_epoch integer[],
    t_time text[], t_signature bytea[],
    l_memory bigint[], l_kind text[], l_seq integer[], l_hash bytea[]
) RETURNS bigint[] LANGUAGE plpgsql AS $$
DECLARE
    ok boolean;
    base bigint;
    ids bigint[];
BEGIN
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
        SELECT org, u.memory, u.seq, u.pw, u.nw, u.val, u.eta, u.ev::jsonb, u.prev, u.epoch, u.t, u.sig, u.h
          FROM unnest(n_memory, n_seq, n_prev_weight, n_new_weight, n_valence, n_eta, n_evidence, n_prev,
                      n_epoch, n_time, n_signature, n_hash)
               WITH ORDINALITY AS u(memory, seq, pw, nw, val, eta, ev, prev, epoch, t, sig, h, ord)
         ORDER BY u.ord
        RETURNING id, memory_id, seq)
    SELECT array_agg(ins.id ORDER BY u.ord) INTO ids
      FROM ins JOIN unnest(n_memory, n_seq) WITH ORDINALITY AS u(memory, seq, ord)
        ON ins.memory_id = u.memory AND ins.seq = u.seq;
    INSERT INTO ledger_transitioncommitment (organization_id, memory_id, seq, new_weight_q, provenance_hash,
                                             epoch, time, signature)
    SELECT org, u.memory, u.seq, u.nw, u.ph, u.epoch, u.t, u.sig
      FROM unnest(t_memory, t_seq, t_new_weight, t_provenance, t_epoch, t_time, t_signature)
           WITH ORDINALITY AS u(memory, seq, nw, ph, epoch, t, sig, ord)
     ORDER BY u.ord;
    SELECT COALESCE(MAX(index) + 1, 0) INTO base FROM ledger_logleaf WHERE organization_id = org;
    INSERT INTO ledger_logleaf (organization_id, index, memory_id, kind, seq, leaf_hash)
    SELECT org, base + u.ord - 1, u.memory, u.kind, u.seq, u.h
      FROM unnest(l_memory, l_kind, l_seq, l_hash) WITH ORDINALITY AS u(memory, kind, seq, h, ord)
     ORDER BY u.ord;
    UPDATE ledger_memory m SET live_seq = v.seq, live_weight_q = v.w, chain_head = v.head
      FROM unnest(m_id, m_new_seq, m_new_head, m_new_weight) AS v(id, seq, head, w)
     WHERE m.id = v.id;
    RETURN ids;
END $$
"""
BACKWARD = "DROP FUNCTION IF EXISTS ledger_append_transitions"


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(FORWARD, params=None)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(BACKWARD, params=None)


class Migration(migrations.Migration):
    dependencies = [("ledger", "0009_perf_append_guard")]  # noqa: RUF012 (Django reads class attributes)

    operations = [migrations.RunPython(forwards, backwards)]  # noqa: RUF012
