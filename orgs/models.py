from __future__ import annotations

from django.conf import settings
from django.db import models


class Role(models.TextChoices):
    ANALYST = "analyst", "Analyst"
    REVIEWER = "reviewer", "Reviewer"
    ADMIN = "admin", "Org admin"


class Organization(models.Model):
    """A tenant. Every object a user can reach hangs off exactly one organization."""

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Review policy, set by an org admin (never by an analyst on a store): with four-eyes on, a
    # label that takes a memory out of recall needs a second, eligible person's approval.
    four_eyes = models.BooleanField(default=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.ANALYST)
    created_at = models.DateTimeField(auto_now_add=True)
    # Who brought this member in (an invitation's sender); review rules use it to refuse an
    # approval through an account the proposer created.
    invited_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    is_active = models.BooleanField(default=True)

    class Meta:
        ordering = ["organization", "user__username"]
        constraints = [models.UniqueConstraint(fields=["organization", "user"], name="membership_unique_user_per_org")]

    def __str__(self) -> str:
        return f"{self.user} in {self.organization} ({self.role})"

    @property
    def can_propose(self) -> bool:
        return self.role in (Role.ANALYST, Role.ADMIN)

    @property
    def can_review(self) -> bool:
        return self.role in (Role.REVIEWER, Role.ADMIN)

    @property
    def is_admin(self) -> bool:
        return self.role == Role.ADMIN


class Invitation(models.Model):
    """A one-time link an org admin sends to bring someone in.

    The link carries a signed token; only the SHA-256 of its random part is stored. The invitee
    opens it and either sets their own password (a new account) or logs in and accepts (an
    existing account): nobody joins an organization without their consent, and the admin never
    sees a password. Single use (``accepted_at``), expiring (``expires_at``), revocable.
    """

    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="invitations")
    email = models.EmailField(blank=True)
    # The username the admin typed, if any: a new account is created under it; an existing
    # account must log in as it to accept.
    username = models.CharField(max_length=150, blank=True)
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.ANALYST)
    invited_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    nonce_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                    related_name="+")
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"invitation to {self.organization} for {self.username or self.email}"

    @property
    def invitee(self) -> str:
        return self.username or self.email

    def state(self, now) -> str:
        if self.accepted_at is not None:
            return "accepted"
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at <= now:
            return "expired"
        return "pending"


class NotificationEvent(models.TextChoices):
    AUDIT_FINISHED = "audit.finished", "An audit finished"
    PROPOSAL_WAITING = "proposal.waiting", "A proposal waits for review"
    LABEL_SIGNED = "label.signed", "A label was signed"
    PROPOSAL_ASSIGNED = "proposal.assigned", "A proposal was assigned to a reviewer"  # audits.casework


class WebhookEndpoint(models.Model):
    """An organization's outgoing webhook: events are POSTed as JSON, signed with HMAC-SHA256
    under a secret shown to the admin once, when the endpoint is made, and stored only encrypted
    (``orgs.secret_box``)."""

    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="webhooks")
    url = models.URLField(max_length=500)
    secret_encrypted = models.BinaryField(editable=False)
    events = models.JSONField(default=list)
    is_active = models.BooleanField(default=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "pk"]

    def __str__(self) -> str:
        return self.url


class WebhookDelivery(models.Model):
    """One event sent (or being sent) to one endpoint; retried by Celery until it lands or gives up.
    ``error`` is our own wording (status code, timeout), never the receiver's body."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        DELIVERED = "delivered", "Delivered"
        FAILED = "failed", "Failed"

    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=64)
    payload = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveIntegerField(default=0)
    response_code = models.PositiveIntegerField(null=True, blank=True)
    error = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]


class NotificationSettings(models.Model):
    """Email notifications of an organization (console backend unless EMAIL_BACKEND says otherwise)."""

    organization = models.OneToOneField(Organization, on_delete=models.PROTECT, related_name="notification_settings")
    email_recipients = models.TextField(blank=True, help_text="Addresses, one per line or comma-separated.")
    email_events = models.JSONField(default=list)

    def recipients(self) -> list[str]:
        return [a.strip() for a in self.email_recipients.replace(",", "\n").splitlines() if a.strip()]


class ActivityEvent(models.Model):
    """One row of an organization's activity trail: who did what, when, from where.

    Append-only: written only by :func:`orgs.services.activity_record`, never updated or deleted
    (the admin is read-only). ``ledger_ref`` names the ledger entry a row caused, when there is one.
    """

    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="activity")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="+")
    actor_label = models.CharField(max_length=200)
    verb = models.CharField(max_length=64)
    target = models.CharField(max_length=300, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    ip = models.GenericIPAddressField(null=True, blank=True)
    ledger_ref = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["organization", "-created_at"], name="activity_org_time")]

    def __str__(self) -> str:
        return f"{self.actor_label} {self.verb} {self.target}"


class WorkerHeartbeat(models.Model):
    """Written every few seconds by each Celery worker (see orgs.health); read by the status page."""

    hostname = models.CharField(max_length=255, unique=True)
    queues = models.CharField(max_length=255)
    pid = models.IntegerField()
    started_at = models.DateTimeField()
    last_seen = models.DateTimeField()

    def __str__(self) -> str:
        return self.hostname
