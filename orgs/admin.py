from django.contrib import admin

from orgs.forms import AdminLoginForm
from orgs.models import ActivityEvent, Invitation, Membership, Organization, WorkerHeartbeat

# /admin/login/ is throttled like /login/ (per username and address, and per password).
admin.site.login_form = AdminLoginForm


class MembershipInline(admin.TabularInline):
    model = Membership
    raw_id_fields = ["user"]
    extra = 0


@admin.register(Organization)
class OrganizationAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "created_at"]
    search_fields = ["name", "slug"]
    inlines = [MembershipInline]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "organization", "role"]
    list_filter = ["role"]
    search_fields = ["user__username", "organization__name"]
    list_select_related = ["user", "organization"]
    raw_id_fields = ["user", "organization"]


@admin.register(WorkerHeartbeat)
class WorkerHeartbeatAdmin(admin.ModelAdmin):
    list_display = ["hostname", "queues", "pid", "last_seen"]


@admin.register(ActivityEvent)
class ActivityEventAdmin(admin.ModelAdmin):
    """Read-only: the trail is append-only (a database trigger refuses UPDATE and DELETE too)."""

    list_display = ["created_at", "organization", "actor_label", "verb", "target", "ip"]
    list_filter = ["verb"]
    search_fields = ["actor_label", "verb", "target", "organization__name"]
    list_select_related = ["organization"]
    raw_id_fields = ["organization", "actor"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):
    list_display = ["organization", "username", "email", "role", "invited_by", "created_at", "accepted_at",
                    "revoked_at"]
    search_fields = ["username", "email", "organization__name"]
    list_select_related = ["organization", "invited_by"]
    raw_id_fields = ["organization", "invited_by", "accepted_by"]
    readonly_fields = ["nonce_hash", "accepted_at", "accepted_by"]

    def has_add_permission(self, request) -> bool:
        return False  # invitations are made on the members page (a link for the invitee)
