"""MutMem ledger tables.

Each signed entry is stored as typed columns from which ``ledger.core.entries`` rebuilds the
exact signed body (the row *is* the body): editing any column changes the body's hash and
breaks its signature, which ``ledger_verify`` and the portable verifier report. Hashes,
keys and signatures are raw bytes (32/32/64) to keep rows small. Database triggers
(migration ``0002_triggers``) forbid UPDATE/DELETE on the entry tables, keep memory content
immutable, and allow the live weight to change only together with a matching transition.
Writes go through ``ledger.services`` only.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models

from orgs.models import Organization


class Store(models.Model):
    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="stores")
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=64)
    description = models.TextField(blank=True)
    # Recall policy: poison_likely is always excluded; poison_suspect too when this is on and the
    # organization has four-eyes off (ledger.recall.excluded_states). Four-eyes itself is the
    # organization's policy (Organization.four_eyes), never a store flag.
    exclude_suspect = models.BooleanField(default=True)
    embedding_model = models.CharField(max_length=300, blank=True, help_text="empty = all-MiniLM-L6-v2")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["organization", "slug"], name="store_unique_slug_per_org")]

    def __str__(self) -> str:
        return self.name


class ImportJob(models.Model):
    """An upload of memories being validated, stored and signed; shows progress for big files."""

    class Status(models.TextChoices):
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    organization = models.ForeignKey(Organization, on_delete=models.PROTECT)
    store = models.ForeignKey(Store, on_delete=models.PROTECT, related_name="imports")
    filename = models.CharField(max_length=255)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    total = models.IntegerField(default=0)
    done = models.IntegerField(default=0)
    errors = models.JSONField(default=list, blank=True)  # [{file, line, field, message}], at most 100
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # What the job imports (memories, or incidents staged for a worker), the format the registry
    # chose and why, every issue found (``errors`` keeps the first 100), the upload's size, the
    # staged file a worker parses (over IMPORT_INLINE_MAX_BYTES), and the foreign store's
    # history (mem0 UPDATE/DELETE) still to be signed after the genesis entries.
    kind = models.CharField(max_length=16, default="memories")
    format = models.CharField(max_length=64, blank=True)
    format_message = models.CharField(max_length=255, blank=True)
    issue_count = models.IntegerField(default=0)
    size_bytes = models.BigIntegerField(default=0)
    staged_path = models.CharField(max_length=500, blank=True)
    history = models.JSONField(default=list, blank=True)
    history_applied = models.IntegerField(default=0)


class Memory(models.Model):
    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="memories")
    store = models.ForeignKey(Store, on_delete=models.PROTECT, related_name="memories")
    external_id = models.CharField(max_length=255)
    text = models.TextField()
    metadata = models.JSONField(default=dict, blank=True)
    content_sha256 = models.BinaryField(max_length=32)
    created_at = models.DateTimeField()
    # Live state, derived from the chains; changes only with a matching transition/label.
    live_weight_q = models.IntegerField(default=1000)
    live_seq = models.IntegerField(default=0)  # seq of the last provenance node (0 = genesis)
    chain_head = models.BinaryField(max_length=32, null=True)  # null until the genesis is signed
    epistemic_state = models.CharField(max_length=16, blank=True, default="")
    label_seq = models.IntegerField(default=-1)  # seq of the last label (-1 = none)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["store", "external_id"], name="memory_unique_id_per_store")]
        indexes = [models.Index(fields=["store", "epistemic_state"]), models.Index(fields=["organization", "chain_head"])]

    def __str__(self) -> str:
        return self.external_id

    @property
    def weight(self) -> float:
        return self.live_weight_q / 1000

    @property
    def is_signed(self) -> bool:
        return self.chain_head is not None

    @property
    def ledger_id(self) -> str:
        """The memory's id inside signed bodies, bundles and receipts: unique per tenant
        (``external_id`` is unique per store only), and it commits the store and external id."""
        return f"{self.store.slug}/{self.external_id}"


class KeyEpoch(models.Model):
    """Public half of a housekeeper key epoch. The private key never enters the database."""

    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="key_epochs")
    number = models.IntegerField()
    public_key = models.BinaryField(max_length=32)
    not_before = models.CharField(max_length=32)
    not_after = models.CharField(max_length=32)
    revoked_at = models.CharField(max_length=32, blank=True, default="")
    endorsement = models.BinaryField(max_length=64, null=True)

    class Meta:
        ordering = ["organization", "number"]
        constraints = [models.UniqueConstraint(fields=["organization", "number"], name="epoch_unique_number")]


class SignedRow(models.Model):
    """The columns every stored signed entry carries: whose log, which epoch signed it, when, and
    the signature over the body rebuilt from the row."""

    organization = models.ForeignKey(Organization, on_delete=models.PROTECT)
    epoch = models.IntegerField()
    time = models.CharField(max_length=32)
    signature = models.BinaryField(max_length=64)

    class Meta:
        abstract = True


class ChainEntry(SignedRow):
    """An entry of one of a memory's chains (provenance, transition, label): numbered by ``seq``,
    unique per memory (each subclass names its constraint), read in chain order."""

    seq = models.IntegerField()

    class Meta:
        abstract = True
        ordering = ["memory", "seq"]


class GenesisEntry(SignedRow):
    memory = models.OneToOneField(Memory, on_delete=models.PROTECT, related_name="genesis")
    weight_q = models.IntegerField()
    entry_hash = models.BinaryField(max_length=32)


class ProvenanceNode(ChainEntry):
    memory = models.ForeignKey(Memory, on_delete=models.PROTECT, related_name="provenance")
    prev_weight_q = models.IntegerField()
    new_weight_q = models.IntegerField()
    valence_q = models.IntegerField()
    eta_q = models.IntegerField()
    evidence = models.JSONField(default=list)  # outcome ids / hashes that justified the move
    prev = models.BinaryField(max_length=32)
    entry_hash = models.BinaryField(max_length=32)

    class Meta(ChainEntry.Meta):
        constraints = [models.UniqueConstraint(fields=["memory", "seq"], name="provenance_unique_seq")]


class TransitionCommitment(ChainEntry):
    """The dual commitment: binds the new weight to the hash of its provenance node."""

    memory = models.ForeignKey(Memory, on_delete=models.PROTECT, related_name="transitions")
    new_weight_q = models.IntegerField()
    provenance_hash = models.BinaryField(max_length=32)

    class Meta(ChainEntry.Meta):
        constraints = [models.UniqueConstraint(fields=["memory", "seq"], name="transition_unique_seq")]


class EpistemicLabel(ChainEntry):
    class Label(models.TextChoices):
        SUSPECT = "poison_suspect", "Poison suspect"
        LIKELY = "poison_likely", "Poison likely"
        REFUTED = "poison_refuted", "Poison refuted"

    memory = models.ForeignKey(Memory, on_delete=models.PROTECT, related_name="labels")
    label = models.CharField(max_length=16, choices=Label.choices)
    reason = models.TextField()
    evidence = models.JSONField(default=dict)
    actor = models.CharField(max_length=200)  # "user:<username>" or "<classifier>@<version>"
    prev = models.BinaryField(max_length=32)
    entry_hash = models.BinaryField(max_length=32)

    class Meta(ChainEntry.Meta):
        constraints = [models.UniqueConstraint(fields=["memory", "seq"], name="label_unique_seq")]


class LogLeaf(models.Model):
    """The organization's RFC 6962 log: one leaf per ledger entry, in append order.

    A memory's entries name their memory; a key endorsement (``kind`` ``key_endorsement``,
    ``seq`` its endorsement seq) names none.
    """

    organization = models.ForeignKey(Organization, on_delete=models.PROTECT)
    index = models.BigIntegerField()
    memory = models.ForeignKey(Memory, on_delete=models.PROTECT, null=True, blank=True)
    kind = models.CharField(max_length=16)
    seq = models.IntegerField()
    leaf_hash = models.BinaryField(max_length=32)

    class Meta:
        ordering = ["organization", "index"]
        constraints = [models.UniqueConstraint(fields=["organization", "index"], name="logleaf_unique_index")]
        # One memory's leaves in log order (verification, export of a memory): without it SQLite
        # walks the whole organization log through the unique index (78 ms at 120k leaves).
        indexes = [models.Index(fields=["memory", "index"], name="logleaf_memory_index")]


class TreeHead(models.Model):
    organization = models.ForeignKey(Organization, on_delete=models.PROTECT)
    size = models.BigIntegerField()
    root = models.BinaryField(max_length=32)
    time = models.CharField(max_length=32)
    epoch = models.IntegerField()
    signature = models.BinaryField(max_length=64)
    # The same tree head as a C2SP checkpoint note (ledger.core.checkpoint): the housekeeper's
    # Ed25519 signature over the note text, so witnesses can cosign it. Written with the row
    # (the table is append-only); null on tree heads signed before checkpoints existed.
    checkpoint_signature = models.BinaryField(max_length=64, null=True, blank=True)

    class Meta:
        ordering = ["organization", "size"]
        constraints = [models.UniqueConstraint(fields=["organization", "size"], name="treehead_unique_size")]


class WitnessKey(models.Model):
    """A transparency-log witness an org admin trusts to cosign checkpoints (C2SP tlog-cosignature,
    Ed25519 ``cosignature/v1``); only these keys' cosignatures are accepted and stored."""

    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="witness_keys")
    name = models.CharField(max_length=200)
    public_key = models.BinaryField(max_length=32)
    added_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["organization", "name"], name="witnesskey_unique_name")]


class WitnessCosignature(models.Model):
    """One witness's verified cosignature of one tree head's checkpoint."""

    tree_head = models.ForeignKey(TreeHead, on_delete=models.PROTECT, related_name="cosignatures")
    witness = models.ForeignKey(WitnessKey, on_delete=models.PROTECT, related_name="cosignatures")
    timestamp = models.BigIntegerField()  # the witness's POSIX time in the signed message
    signature = models.BinaryField(max_length=64)
    received_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tree_head", "witness"], name="cosignature_unique")]


class ReceiptKey(models.Model):
    """Public half of the lower-privilege key that signs recall receipts.

    A receipt key is only trusted with a ``KeyEndorsement`` (purpose ``receipt``) naming its
    ``key_id``, signed by a housekeeper epoch key; the recall process asks the housekeeper for it.
    """

    organization = models.ForeignKey(Organization, on_delete=models.PROTECT)
    key_id = models.CharField(max_length=32)
    public_key = models.BinaryField(max_length=32)
    created_at = models.DateTimeField(auto_now_add=True)


class KeyEndorsement(models.Model):
    """An epoch key's signed endorsement of a shorter-lived key (``ledger.core.keys.KeyEndorsement``).

    Purpose ``online``: the housekeeper's in-memory signing key (entries and tree heads), rotated
    every ``ONLINE_KEY_VALIDITY_HOURS``; ``receipt``: a recall-receipt key. Only the public half is
    here. ``seq`` numbers the organization's endorsements; ``revoked_at`` is set once, by the
    housekeeper, and ends the key early.
    """

    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="+")
    seq = models.IntegerField()
    purpose = models.CharField(max_length=16)
    key_id = models.CharField(max_length=32)
    public_key = models.BinaryField(max_length=32)
    not_before = models.CharField(max_length=32)
    not_after = models.CharField(max_length=32)
    epoch = models.IntegerField()
    time = models.CharField(max_length=32)
    signature = models.BinaryField(max_length=64)
    revoked_at = models.CharField(max_length=32, blank=True, default="")

    class Meta:
        ordering = ["organization", "seq"]
        constraints = [models.UniqueConstraint(fields=["organization", "seq"], name="keyendorsement_unique_seq")]
        indexes = [models.Index(fields=["organization", "purpose", "key_id"], name="keyendorsement_key")]


class ClassifierFinding(models.Model):
    """One flag of the ingest classifier, recorded before any label is signed.

    The housekeeper signs the classifier's ``poison_likely`` only from a finding row (the label
    task carries its id, nothing else) and re-checks it first: same classifier version, the
    memory's content unchanged since the finding, a group the memory belongs to.
    """

    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="+")
    memory = models.ForeignKey(Memory, on_delete=models.PROTECT, related_name="classifier_findings")
    classifier = models.CharField(max_length=100)  # "<name>@<version>", the signed label's actor
    reason = models.TextField()
    evidence = models.JSONField(default=dict)  # already signable (no floats)
    content_sha256 = models.BinaryField(max_length=32)
    created_at = models.DateTimeField(auto_now_add=True)
    label = models.ForeignKey(EpistemicLabel, null=True, blank=True, on_delete=models.PROTECT, related_name="+")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["memory", "classifier"], name="finding_unique_per_version")]


class SigningRefusal(models.Model):
    """A label task the housekeeper refused to sign (no recorded, eligible decision behind it).

    Shown on the keys page: a refusal means something wrote to the housekeeper's queue that no
    reviewer decided, which an org admin should look into. ``organization`` is null when the
    message named nothing that belongs to an organization.
    """

    organization = models.ForeignKey(Organization, null=True, blank=True, on_delete=models.PROTECT,
                                     related_name="+")
    task = models.CharField(max_length=100)
    reason = models.TextField()
    payload = models.JSONField(default=dict)  # a summary: argument names and short values, never whole bodies
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-pk"]


class AgentToken(models.Model):
    """Per-store bearer token for an agent that recalls and reports outcomes. Only a hash is kept."""

    organization = models.ForeignKey(Organization, on_delete=models.PROTECT)
    store = models.ForeignKey(Store, on_delete=models.PROTECT, related_name="agent_tokens")
    name = models.CharField(max_length=100)
    token_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Null = never expires (tokens made before expiry existed); new tokens get one by default.
    expires_at = models.DateTimeField(null=True, blank=True)
    # Updated at most once a minute (agent_tokens.TOUCH_EVERY), not on every recall.
    last_used_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")

    def state(self, now) -> str:
        """revoked, expired, suspended (its creator left: read through ``ledger.agent_tokens``,
        which annotates ``creator_active``) or active."""
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        if self.created_by_id is not None and getattr(self, "creator_active", True) is False:
            return "suspended"
        return "active"


class Receipt(models.Model):
    organization = models.ForeignKey(Organization, on_delete=models.PROTECT)
    store = models.ForeignKey(Store, on_delete=models.PROTECT, related_name="receipts")
    body = models.JSONField()  # the full signed receipt as returned to the agent
    created_at = models.DateTimeField(auto_now_add=True)


class Outcome(models.Model):
    """An agent's reward for a recalled memory; append-only. ``transition`` is set once, when
    the housekeeper folds it into a signed weight transition."""

    organization = models.ForeignKey(Organization, on_delete=models.PROTECT)
    receipt = models.ForeignKey(Receipt, on_delete=models.PROTECT, related_name="outcomes")
    memory = models.ForeignKey(Memory, on_delete=models.PROTECT, related_name="outcomes")
    reward_q = models.IntegerField()  # [-1000, 1000]
    created_at = models.DateTimeField(auto_now_add=True)
    transition = models.ForeignKey(ProvenanceNode, null=True, blank=True, on_delete=models.PROTECT)


class EmbeddingCache(models.Model):
    model = models.CharField(max_length=300)
    content_sha256 = models.BinaryField(max_length=32)
    vector = models.BinaryField()  # float32 little-endian, L2-normalised

    class Meta:
        constraints = [models.UniqueConstraint(fields=["model", "content_sha256"], name="embedding_unique")]
