"""Django admin for superusers: read-mostly views of audit state. Writes go through services."""

from __future__ import annotations

from django.contrib import admin

from audits.models import (
    AuditRun,
    AuditSuspect,
    Incident,
    ReplayCacheEntry,
    ReplayJobRecord,
    ReviewProposal,
)


class _ReadOnlyAdmin(admin.ModelAdmin):
    """Rows written by services and workers; changing them here would route around both."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Incident)
class IncidentAdmin(_ReadOnlyAdmin):
    list_display = ("external_id", "store", "organization", "created_by", "created_at")
    list_select_related = ("store", "organization", "created_by")
    list_filter = ("organization",)
    search_fields = ("external_id", "query", "output")
    raw_id_fields = ("store", "organization", "created_by")


class AuditSuspectInline(admin.TabularInline):
    model = AuditSuspect
    fields = ("rank", "memory", "ds", "cmis", "cas", "in_batch")
    readonly_fields = fields
    raw_id_fields = ("memory",)
    extra = 0
    max_num = 0
    can_delete = False


@admin.register(AuditRun)
class AuditRunAdmin(_ReadOnlyAdmin):
    list_display = ("id", "store", "organization", "status", "stage", "replays_done", "replays_total", "created_at")
    list_select_related = ("store", "organization")
    list_filter = ("status", "organization")
    search_fields = ("store__name", "error")
    raw_id_fields = ("store", "organization", "created_by", "incidents")
    inlines = (AuditSuspectInline,)


@admin.register(ReplayJobRecord)
class ReplayJobRecordAdmin(_ReadOnlyAdmin):
    list_display = ("run", "job_id", "event_id", "kind", "target", "status")
    list_select_related = ("run",)
    list_filter = ("status", "kind")
    search_fields = ("job_id", "event_id", "target")
    raw_id_fields = ("run",)


@admin.register(ReplayCacheEntry)
class ReplayCacheEntryAdmin(_ReadOnlyAdmin):
    list_display = ("key", "store", "agent_hash", "created_at")
    list_select_related = ("store",)
    search_fields = ("key", "text")
    raw_id_fields = ("store",)


@admin.register(ReviewProposal)
class ReviewProposalAdmin(_ReadOnlyAdmin):
    list_display = ("id", "memory", "store", "source", "status", "proposed_by_actor", "decided_by", "created_at")
    list_select_related = ("memory", "store", "decided_by")
    list_filter = ("status", "source", "organization")
    search_fields = ("memory__external_id", "reason", "decision_reason", "idempotency_key")
    raw_id_fields = ("organization", "store", "memory", "audit_run", "proposed_by", "decided_by", "flag_label", "label")
