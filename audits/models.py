"""MemAudit tables: incidents, audit runs and their replay work, suspects, review proposals.

Writes go through ``audits.services``; reads for pages and the API through
``audits.selectors``. The algorithms live in ``audits.engine`` (no Django).

Coordination of a distributed run happens in these rows, not in a result backend: each
replay job is a ``ReplayJobRecord`` whose ``pending -> done`` move is a conditional UPDATE,
and the run's stage moves ``replay -> analysis`` the same way, so exactly one worker starts
the second stage and a redelivered task never counts a replay twice.
"""

from __future__ import annotations

from django.conf import settings as conf
from django.db import models
from django.db.models import Q

from ledger.models import EpistemicLabel, Memory, ProvenanceNode, Store
from orgs.models import Organization


class Incident(models.Model):
    """A harmful event e = (q*, y*, R*) as found in the agent's logs (DESIGN section 4)."""

    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="incidents")
    store = models.ForeignKey(Store, on_delete=models.PROTECT, related_name="incidents")
    external_id = models.CharField(max_length=255)
    query = models.TextField()
    output = models.TextField(blank=True)
    # External ids of the memories the agent retrieved, in rank order.
    retrieved = models.JSONField(default=list)
    # Harm spec ({"type": "contains", "target": ...}); null = use the run's default harm.
    harm = models.JSONField(null=True, blank=True)
    # Observed harm when the file gave a number (or a boolean) instead of a spec.
    harm_value = models.FloatField(null=True, blank=True)
    # Answer options of the probe this incident came from (builtin-reader uses them).
    candidates = models.JSONField(null=True, blank=True)
    created_by = models.ForeignKey(conf.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("-created_at", "external_id")
        constraints = (models.UniqueConstraint(fields=["store", "external_id"], name="incident_unique_id_per_store"),)

    def __str__(self) -> str:
        return self.external_id


class AuditRun(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    class Stage(models.TextChoices):
        QUEUED = "queued", "Queued"
        PREPARE = "prepare", "Embedding and planning replays"
        REPLAY = "replay", "Counterfactual replays"
        ANALYSIS = "analysis", "Graph, fusion and residual harm"
        FINISHED = "finished", "Finished"

    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="audit_runs")
    store = models.ForeignKey(Store, on_delete=models.PROTECT, related_name="audit_runs")
    incidents = models.ManyToManyField(Incident, related_name="audit_runs")
    # Validated by services.audit_settings_clean: agent, alpha, harm, budget, top_n/threshold,
    # consistency backend, group thresholds...
    settings = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    stage = models.CharField(max_length=16, choices=Stage.choices, default=Stage.QUEUED)
    replays_done = models.IntegerField(default=0)
    replays_total = models.IntegerField(default=0)
    # Everything the results page shows beyond the suspect rows: batch, residual harm,
    # baselines, graph for Plotly, groups, events, agent calls, timings.
    results = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    # What the analysis depends on (store's ledger state, incidents, settings): a later run with
    # the same fingerprint reuses a finished run's analysis instead of recomputing it.
    fingerprint = models.CharField(max_length=64, blank=True, db_index=True)
    created_by = models.ForeignKey(conf.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("-created_at",)
        indexes = (models.Index(fields=["organization", "status"]),)

    def __str__(self) -> str:
        return f"Audit #{self.pk} of {self.store}"

    @property
    def progress_percent(self) -> int:
        if self.status == self.Status.DONE:
            return 100
        if self.replays_total <= 0:
            return 0
        # The replays are most of the work; the analysis stage holds the bar just short of 100.
        return min(99, int(95 * self.replays_done / self.replays_total))

    @property
    def is_finished(self) -> bool:
        return self.status in (self.Status.DONE, self.Status.FAILED)


class AuditSuspect(models.Model):
    """One ranked candidate of a finished run (DS = α·CMIS^ + (1 − α)·CAS^)."""

    run = models.ForeignKey(AuditRun, on_delete=models.CASCADE, related_name="suspects")
    memory = models.ForeignKey(Memory, on_delete=models.PROTECT, related_name="audit_suspects")
    rank = models.IntegerField()
    ds = models.FloatField()
    cmis = models.FloatField()
    cmis_ci_low = models.FloatField(default=0.0)
    cmis_ci_high = models.FloatField(default=0.0)
    cmis_hat = models.FloatField(default=0.0)
    cas = models.FloatField()
    cas_hat = models.FloatField(default=0.0)
    # [{event, single, group, group_id, score, se, reference, reproduced, in_rstar}, ...]
    per_event = models.JSONField(default=list, blank=True)
    signals = models.JSONField(default=dict, blank=True)  # the structural CAS signals
    in_batch = models.BooleanField(default=False)

    class Meta:
        ordering = ("run", "rank")
        constraints = (models.UniqueConstraint(fields=["run", "memory"], name="suspect_unique_memory_per_run"),)

    def __str__(self) -> str:
        return f"#{self.rank} {self.memory_id} (DS {self.ds:.3f})"


class ReplayCacheEntry(models.Model):
    """An agent's answer to f(q, R): keyed by (query, retrieved ids, agent config hash).

    Namespaced by store: memory ids are only unique within a store, and one tenant's agent
    output must never answer for another's.
    """

    store = models.ForeignKey(Store, on_delete=models.CASCADE, related_name="replay_cache")
    key = models.CharField(max_length=64)  # audits.engine.replay.replay_key
    agent_hash = models.CharField(max_length=64, blank=True)
    text = models.TextField(blank=True)
    samples = models.JSONField(default=list)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = (models.UniqueConstraint(fields=["store", "key"], name="replay_cache_unique_key"),)

    def to_output(self) -> dict:
        return {"text": self.text, "samples": list(self.samples) or [self.text]}


class ReplayJobRecord(models.Model):
    """One planned CMIS replay of a run (``engine.cmis.ReplayJob``) and, once done, its result."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        DONE = "done", "Done"

    run = models.ForeignKey(AuditRun, on_delete=models.CASCADE, related_name="jobs")
    job_id = models.CharField(max_length=64)
    event_id = models.CharField(max_length=255)
    kind = models.CharField(max_length=16)  # base | single | group
    target = models.CharField(max_length=255, blank=True)
    removed = models.JSONField(default=list)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    result = models.JSONField(null=True, blank=True)  # engine.cmis.ReplayResult.to_dict()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("run", "id")
        constraints = (models.UniqueConstraint(fields=["run", "job_id"], name="replay_job_unique_per_run"),)
        indexes = (models.Index(fields=["run", "status"]),)


class ReviewProposal(models.Model):
    """A proposal about a memory, decided by a reviewer: that it is poisoned, or (issue 16) that
    it is an honest error to correct.

    ``kind = poison``: proposing appends a signed ``poison_suspect`` label (recall leaves suspects
    out by store policy); approving appends ``poison_likely``, refuting ``poison_refuted``.
    ``kind = correction``: proposing signs nothing (an honest error is not a suspect); approving
    appends a signed down-weight transition whose evidence links the correcting memory, the
    audit and the proposal; rejecting (``refute``) signs nothing. Signed entries are appended by
    the housekeeper worker; until it has done so the proposal is ``applying``.
    """

    class Source(models.TextChoices):
        AUDIT = "audit", "Audit run"
        CLASSIFIER = "classifier", "Ingest classifier"

    class Kind(models.TextChoices):
        POISON = "poison", "Poison suspect"
        CORRECTION = "correction", "Correction (honest error)"

    class CorrectionKind(models.TextChoices):
        NONE = "", "None"
        OUTDATED = "outdated", "Outdated (a newer record corrects it)"
        HONEST_ERROR = "honest-error", "Honest error (isolated)"

    class Status(models.TextChoices):
        OPEN = "open", "Open"
        APPLYING = "applying", "Applying (waiting for the housekeeper)"
        APPROVED = "approved", "Approved"
        REFUTED = "refuted", "Refuted"

    class Decision(models.TextChoices):
        NONE = "", "None"
        APPROVE = "approve", "Approve"
        REFUTE = "refute", "Refute"

    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="review_proposals")
    store = models.ForeignKey(Store, on_delete=models.PROTECT, related_name="review_proposals")
    memory = models.ForeignKey(Memory, on_delete=models.PROTECT, related_name="review_proposals")
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.AUDIT)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.POISON)
    audit_run = models.ForeignKey(AuditRun, null=True, blank=True, on_delete=models.SET_NULL,
                                  related_name="proposals")
    # A correction: outdated or isolated, and the newer memory that corrects it (outdated only).
    correction_kind = models.CharField(max_length=16, choices=CorrectionKind.choices, default=CorrectionKind.NONE,
                                       blank=True)
    corrected_by = models.ForeignKey(Memory, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    # Blank for a correction (it proposes a down-weight, not a label).
    proposed_label = models.CharField(max_length=16, choices=EpistemicLabel.Label.choices,
                                      default=EpistemicLabel.Label.LIKELY, blank=True)
    reason = models.TextField()
    scores = models.JSONField(default=dict, blank=True)  # rank, ds, cmis, cas at proposal time
    proposed_by = models.ForeignKey(conf.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+")
    # "user:<username>" or "<classifier>@<version>": the actor written into the signed label.
    proposed_by_actor = models.CharField(max_length=200)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    decision = models.CharField(max_length=16, choices=Decision.choices, default=Decision.NONE, blank=True)
    decided_by = models.ForeignKey(conf.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    decision_reason = models.TextField(blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    # The label that flagged the memory: our poison_suspect, or the classifier's poison_likely.
    flag_label = models.ForeignKey(EpistemicLabel, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    # The reviewer's signed decision (poison_likely or poison_refuted), once appended.
    label = models.ForeignKey(EpistemicLabel, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    # A correction's signed down-weight (provenance node), once appended.
    transition = models.ForeignKey(ProvenanceNode, null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="+")
    # Passed to ledger label_append: a redelivered task never appends the decision twice.
    idempotency_key = models.CharField(max_length=100, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Case work (audits.casework): the reviewer this proposal is assigned to, by whom and when.
    # Assignment routes work; it grants nothing (four-eyes and roles still decide who may decide).
    assigned_to = models.ForeignKey(conf.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+")
    assigned_by = models.ForeignKey(conf.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+")
    assigned_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at",)
        indexes = (models.Index(fields=["organization", "status"]),
                   models.Index(fields=["organization", "assigned_to", "status"], name="proposal_assignee"))
        constraints = (
            # One live proposal per memory: a second audit finding it again adds nothing to decide.
            models.UniqueConstraint(fields=["memory"], condition=Q(status__in=["open", "applying"]),
                                    name="proposal_one_live_per_memory"),
        )

    def __str__(self) -> str:
        return f"{self.memory_id}: {self.status}"

    @property
    def decision_key(self) -> str:
        return f"{self.idempotency_key}:decision"

    @property
    def flag_key(self) -> str:
        return f"{self.idempotency_key}:flag"

    @property
    def is_correction(self) -> bool:
        return self.kind == self.Kind.CORRECTION


class CaseNote(models.Model):
    """A reviewer's or analyst's note on a suspect (a memory within an audit) or on a proposal.

    Append-only, like the activity trail: notes are evidence for a decision, so a note is
    added, never edited or deleted (written only by ``audits.casework.note_add``). ``body`` is
    the author's markdown as typed; it is rendered escaped (``casework.markdown_render``).
    """

    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="case_notes")
    memory = models.ForeignKey(Memory, on_delete=models.PROTECT, related_name="case_notes")
    # Exactly one of the two: the audit the suspect belongs to, or the proposal.
    audit_run = models.ForeignKey(AuditRun, null=True, blank=True, on_delete=models.PROTECT, related_name="notes")
    proposal = models.ForeignKey(ReviewProposal, null=True, blank=True, on_delete=models.PROTECT,
                                 related_name="notes")
    author = models.ForeignKey(conf.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="+")
    author_label = models.CharField(max_length=200)  # "user:<username>", kept if the account goes
    body = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ("created_at", "pk")
        indexes = (models.Index(fields=["organization", "memory", "created_at"], name="casenote_memory_time"),)
        constraints = (
            models.CheckConstraint(condition=Q(audit_run__isnull=True) ^ Q(proposal__isnull=True),
                                   name="casenote_one_subject"),
        )

    def __str__(self) -> str:
        return f"note #{self.pk} on {self.memory_id} by {self.author_label}"


class AgentEndpoint(models.Model):
    """An agent an organization's admin registered: where its audits' replays are sent.

    Analysts pick one by name; they never type a URL or a secret. The secret (an API key or a
    webhook's bearer token) is stored encrypted (``audits.endpoints``) and is write-only: no
    page, API answer, form or log shows it back, only whether one is set.
    """

    class Connector(models.TextChoices):
        OPENAI_CHAT = "openai-chat", "OpenAI-compatible chat"
        WEBHOOK = "webhook", "Webhook (your agent)"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="agent_endpoints")
    name = models.SlugField(max_length=64, help_text="What analysts pick when they start an audit.")
    connector = models.CharField(max_length=20, choices=Connector.choices)
    # openai-chat: the API root (…/v1); webhook: the URL the replays are POSTed to.
    base_url = models.URLField(max_length=500)
    model = models.CharField(max_length=200, blank=True)
    # Connector settings that are not secret (temperature, max_tokens, timeout, ...).
    options = models.JSONField(default=dict, blank=True)
    secret_encrypted = models.BinaryField(null=True, blank=True, editable=False)
    created_by = models.ForeignKey(conf.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["organization", "name"], name="agent_endpoint_unique_name")]

    def __str__(self) -> str:
        return f"{self.name} ({self.connector})"

    @property
    def has_secret(self) -> bool:
        return bool(self.secret_encrypted)
