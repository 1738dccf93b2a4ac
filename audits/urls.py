from django.urls import path

from audits import views

urlpatterns = [
    path("favicon.ico", views.favicon, name="favicon"),
    path("", views.dashboard, name="dashboard"),
    path("dashboard/runs/", views.dashboard_runs, name="dashboard-runs"),
    path("incidents/", views.incident_list, name="incident-list"),
    path("incidents/new/", views.incident_create, name="incident-create"),
    path("incidents/<int:incident_id>/", views.incident_detail, name="incident-detail"),
    path("audits/", views.audit_list, name="audit-list"),
    path("audits/new/", views.audit_new, name="audit-new"),
    path("audits/<int:audit_run_id>/", views.audit_detail, name="audit-detail"),
    path("audits/<int:audit_run_id>/progress/", views.audit_progress, name="audit-progress"),
    path("audits/<int:audit_run_id>/propose/", views.audit_propose, name="audit-propose"),
    path("audits/<int:audit_run_id>/corrections/", views.audit_propose_corrections, name="audit-propose-corrections"),
    path("audits/<int:audit_run_id>/resume/", views.audit_resume, name="audit-resume"),
    path("agents/", views.agent_endpoint_list, name="agent-endpoint-list"),
    path("agents/<int:endpoint_id>/", views.agent_endpoint_edit, name="agent-endpoint-edit"),
    path("agents/<int:endpoint_id>/delete/", views.agent_endpoint_delete, name="agent-endpoint-delete"),
    path("review/", views.review_queue, name="review-queue"),
    path("review/pending/", views.review_pending, name="review-pending"),
    path("review/bulk/", views.review_bulk, name="review-bulk"),
    path("review/<int:proposal_id>/decide/", views.review_decide, name="review-decide"),
    # case work (issue 15)
    path("review/<int:proposal_id>/notes/", views.proposal_note_add, name="proposal-note-add"),
    path("review/<int:proposal_id>/assign/", views.proposal_assign, name="proposal-assign"),
    path("audits/<int:audit_run_id>/suspects/", views.audit_suspects, name="audit-suspects"),
    path("audits/<int:audit_run_id>/suspects/<int:memory_id>/notes/", views.suspect_notes, name="suspect-notes"),
    path("audits/<int:audit_run_id>/export.csv", views.audit_export, {"fmt": "csv"}, name="audit-export-csv"),
    path("audits/<int:audit_run_id>/export.json", views.audit_export, {"fmt": "json"}, name="audit-export-json"),
]
