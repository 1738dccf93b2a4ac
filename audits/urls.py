from django.urls import path

from audits import views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("incidents/", views.incident_list, name="incident-list"),
    path("audits/", views.audit_list, name="audit-list"),
    path("review/", views.review_queue, name="review-queue"),
]
