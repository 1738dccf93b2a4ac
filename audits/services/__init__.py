"""Write paths of the audit, one module per job:

- ``incidents``: validate an upload against its store, import it all or nothing, one from a form;
- ``settings``: the audit settings' defaults and their one cleaner (connectors and harm types
  from the engine's registries);
- ``runs``: create, resume, fail; step 1 plans the replays once and records them, step 2
  replays chunks of them; a finished analysis is reused when nothing it depends on changed;
- ``replay``: the store as its agent sees it, the per-store replay cache, the connector
  (``agent_for``) and the per-process run context;
- ``analysis``: step 3, the analysis over the recorded plan and results; ``audit_run_now``;
- ``review``: proposals, decisions, the four-eyes rules, syncing signed labels.

An audit run is executed in three steps, coordinated through the database (the embedded broker
has no result backend, so there are no chords):

1. ``audit_run_execute`` (queue ``audit``): load the store's embedding matrix, the events and
   their harm, plan every CMIS replay (``engine.audit.plan_cmis``: near-duplicate groups and
   jobs) and record each as a ``ReplayJobRecord`` (the groups in the run's results); fan the
   pending ones out in chunks as ``audit_replay_task`` (queue ``replay``).
2. ``audit_run_replay`` (queue ``replay``): replay each job of a chunk that is still pending,
   through the per-store ``ReplayCacheEntry`` cache; write the result and bump the run's
   progress in one transaction, guarded by a conditional UPDATE (``pending -> done``), so a
   redelivered chunk never counts twice. The task that sees no job left pending moves the run
   ``replay -> analysis`` with another conditional UPDATE; only the one that wins enqueues step 3.
3. ``audit_run_analyse`` (queue ``audit``): ``engine.audit.analyse`` over the recorded plan and
   results (nothing is planned or replayed again), then graph, CAS, fusion, the batch, residual
   harm and baselines; suspect rows are replaced atomically.

A run survives a worker being killed: calling ``audit_run_execute`` again (``audit_run_resume``)
skips what is recorded and fans out only the pending jobs; a re-audit of an unchanged store hits
the replay cache for every replay.

Services send messages only through ``audits.dispatch``; ``audits.tasks`` imports the services,
never the reverse. Roles are checked with ``orgs.permissions.require``. This package re-exports
the public functions for callers that write ``services.<name>``; modules of this app import the
submodules.
"""

from audits.services.analysis import audit_run_analyse, audit_run_now
from audits.services.incidents import incident_create, incidents_import, incidents_validate
from audits.services.replay import _CONTEXTS, DbReplayCache, RunContext, StoreView, agent_for, make_agent, store_view
from audits.services.review import (
    ProposedBatch,
    actor_for,
    classifier_flags_sync,
    proposal_approve,
    proposal_refute,
    proposal_sync,
    proposals_approve_bulk,
    proposals_create_from_run,
    proposals_refute_bulk,
    proposals_requeue,
    proposals_sync,
    review_ineligibility,
)
from audits.services.runs import (
    audit_run_create,
    audit_run_execute,
    audit_run_fail,
    audit_run_fingerprint,
    audit_run_replay,
    audit_run_resume,
    audit_runs_resume_unfinished,
)
from audits.services.settings import DEFAULT_AUDIT_SETTINGS, audit_settings_clean

__all__ = [
    "DEFAULT_AUDIT_SETTINGS", "DbReplayCache", "ProposedBatch", "RunContext", "StoreView", "_CONTEXTS",
    "actor_for", "agent_for", "audit_run_analyse", "audit_run_create", "audit_run_execute", "audit_run_fail",
    "audit_run_fingerprint", "audit_run_now", "audit_run_replay", "audit_run_resume", "audit_runs_resume_unfinished",
    "audit_settings_clean", "classifier_flags_sync", "incident_create", "incidents_import", "incidents_validate",
    "make_agent", "proposal_approve", "proposal_refute", "proposal_sync", "proposals_approve_bulk",
    "proposals_create_from_run", "proposals_refute_bulk", "proposals_requeue", "proposals_sync",
    "review_ineligibility", "store_view",
]
