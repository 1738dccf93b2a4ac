from django.contrib.auth import views as auth_views
from django.urls import path

from orgs import views

urlpatterns = [
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("account/password/", views.PasswordChangeView.as_view(), name="password_change"),
    path("account/password/done/",
         auth_views.PasswordChangeDoneView.as_view(template_name="registration/password_change_done.html"),
         name="password_change_done"),
    path("password-reset/", views.PasswordResetView.as_view(), name="password_reset"),
    path("password-reset/sent/",
         auth_views.PasswordResetDoneView.as_view(template_name="registration/password_reset_done.html"),
         name="password_reset_done"),
    path("password-reset/<uidb64>/<token>/", views.PasswordResetConfirmView.as_view(),
         name="password_reset_confirm"),
    path("password-reset/complete/",
         auth_views.PasswordResetCompleteView.as_view(template_name="registration/password_reset_complete.html"),
         name="password_reset_complete"),
    path("status/", views.status, name="status"),
    path("members/", views.members, name="members"),
    path("members/<int:membership_id>/role/", views.member_role, name="member-role"),
    path("members/<int:membership_id>/active/", views.member_active, name="member-active"),
    path("members/<int:membership_id>/remove/", views.member_remove_view, name="member-remove"),
    path("invitations/<int:invitation_id>/revoke/", views.invitation_revoke_view, name="invitation-revoke"),
    path("invite/<str:token>/", views.invitation_accept_view, name="invitation-accept"),
    path("activity/", views.activity, name="activity"),
    path("settings/notifications/", views.notification_settings, name="notification-settings"),
    path("settings/notifications/webhooks/<int:webhook_id>/delete/", views.webhook_delete_view,
         name="webhook-delete"),
    path("organization/switch/", views.switch_organization, name="switch-organization"),
    path("organization/review-policy/", views.review_policy, name="review-policy"),
]
