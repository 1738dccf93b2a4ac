from django.contrib.auth import views as auth_views
from django.urls import path

from orgs import views

urlpatterns = [
    path("login/", views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("status/", views.status, name="status"),
    path("members/", views.members, name="members"),
    path("members/<int:membership_id>/role/", views.member_role, name="member-role"),
    path("organization/switch/", views.switch_organization, name="switch-organization"),
    path("organization/review-policy/", views.review_policy, name="review-policy"),
]
