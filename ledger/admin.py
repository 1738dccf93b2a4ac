"""Admin: ledger rows are evidence, so every ledger model is read-only here (no add, change or
delete; the database triggers would refuse most edits anyway). Writes go through ledger.services."""

from __future__ import annotations

from django.contrib import admin

from ledger import models


class ReadOnlyAdmin(admin.ModelAdmin):
    list_select_related = ("organization",)

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(models.Store)
class StoreAdmin(ReadOnlyAdmin):
    list_display = ("name", "slug", "organization", "exclude_suspect", "created_at")
    search_fields = ("name", "slug", "organization__slug")


@admin.register(models.Memory)
class MemoryAdmin(ReadOnlyAdmin):
    list_display = ("external_id", "store", "organization", "live_weight_q", "live_seq", "epistemic_state")
    list_select_related = ("organization", "store")
    list_filter = ("epistemic_state",)
    search_fields = ("external_id", "text", "store__slug", "organization__slug")
    raw_id_fields = ("organization", "store")


class EntryAdmin(ReadOnlyAdmin):
    list_select_related = ("organization", "memory")
    raw_id_fields = ("organization", "memory")
    search_fields = ("memory__external_id", "organization__slug")


@admin.register(models.GenesisEntry)
class GenesisEntryAdmin(EntryAdmin):
    list_display = ("memory", "organization", "weight_q", "epoch", "time")


@admin.register(models.ProvenanceNode)
class ProvenanceNodeAdmin(EntryAdmin):
    list_display = ("memory", "seq", "prev_weight_q", "new_weight_q", "valence_q", "epoch", "time")


@admin.register(models.TransitionCommitment)
class TransitionCommitmentAdmin(EntryAdmin):
    list_display = ("memory", "seq", "new_weight_q", "epoch", "time")


@admin.register(models.EpistemicLabel)
class EpistemicLabelAdmin(EntryAdmin):
    list_display = ("memory", "seq", "label", "actor", "epoch", "time")
    list_filter = ("label",)


@admin.register(models.LogLeaf)
class LogLeafAdmin(EntryAdmin):
    list_display = ("organization", "index", "memory", "kind", "seq")


@admin.register(models.KeyEpoch)
class KeyEpochAdmin(ReadOnlyAdmin):
    list_display = ("organization", "number", "not_before", "not_after", "revoked_at")
    raw_id_fields = ("organization",)
    search_fields = ("organization__slug",)


@admin.register(models.TreeHead)
class TreeHeadAdmin(ReadOnlyAdmin):
    list_display = ("organization", "size", "time", "epoch")
    raw_id_fields = ("organization",)
    search_fields = ("organization__slug",)


@admin.register(models.ReceiptKey)
class ReceiptKeyAdmin(ReadOnlyAdmin):
    list_display = ("organization", "key_id", "created_at")
    raw_id_fields = ("organization",)
    search_fields = ("organization__slug", "key_id")


@admin.register(models.Receipt)
class ReceiptAdmin(ReadOnlyAdmin):
    list_display = ("organization", "store", "created_at")
    list_select_related = ("organization", "store")
    raw_id_fields = ("organization", "store")
    search_fields = ("organization__slug", "store__slug")


@admin.register(models.Outcome)
class OutcomeAdmin(ReadOnlyAdmin):
    list_display = ("organization", "memory", "reward_q", "transition", "created_at")
    list_select_related = ("organization", "memory")
    raw_id_fields = ("organization", "receipt", "memory", "transition")
    search_fields = ("memory__external_id", "organization__slug")
