from django.urls import path

from orgs import api

urlpatterns = [
    path("me/", api.MeApi.as_view(), name="api-me"),
    path("members/", api.MemberListApi.as_view(), name="api-members"),
    path("organization/review-policy/", api.ReviewPolicyApi.as_view(), name="api-review-policy"),
    path("activity/", api.ActivityListApi.as_view(), name="api-activity"),
]
