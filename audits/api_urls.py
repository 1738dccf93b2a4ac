from django.urls import path

from audits import api

urlpatterns = [
    path("incidents/", api.IncidentListApi.as_view(), name="api-incidents"),
    path("incidents/create/", api.IncidentCreateApi.as_view(), name="api-incident-create"),
    path("incidents/upload/", api.IncidentUploadApi.as_view(), name="api-incident-upload"),
    path("incidents/<int:incident_id>/", api.IncidentDetailApi.as_view(), name="api-incident"),
    path("audits/", api.AuditRunListApi.as_view(), name="api-audits"),
    path("audits/create/", api.AuditRunCreateApi.as_view(), name="api-audit-create"),
    path("audits/<int:audit_run_id>/", api.AuditRunDetailApi.as_view(), name="api-audit"),
    path("audits/<int:audit_run_id>/progress/", api.AuditRunProgressApi.as_view(), name="api-audit-progress"),
    path("audits/<int:audit_run_id>/suspects/", api.AuditRunSuspectsApi.as_view(), name="api-audit-suspects"),
    path("audits/<int:audit_run_id>/propose/", api.AuditRunProposeApi.as_view(), name="api-audit-propose"),
    path("audits/<int:audit_run_id>/corrections/", api.AuditRunCorrectApi.as_view(), name="api-audit-corrections"),
    path("agent-endpoints/", api.AgentEndpointListApi.as_view(), name="api-agent-endpoints"),
    path("agent-endpoints/<int:endpoint_id>/", api.AgentEndpointDetailApi.as_view(), name="api-agent-endpoint"),
    path("reviews/", api.ReviewListApi.as_view(), name="api-reviews"),
    path("reviews/approve/", api.ReviewBulkApproveApi.as_view(), name="api-reviews-approve"),
    path("reviews/refute/", api.ReviewBulkRefuteApi.as_view(), name="api-reviews-refute"),
    path("reviews/<int:proposal_id>/approve/", api.ReviewApproveApi.as_view(), name="api-review-approve"),
    path("reviews/<int:proposal_id>/refute/", api.ReviewRefuteApi.as_view(), name="api-review-refute"),
    # case work (issue 15)
    path("reviews/<int:proposal_id>/notes/", api.ProposalNotesApi.as_view(), name="api-review-notes"),
    path("reviews/<int:proposal_id>/assign/", api.ReviewAssignApi.as_view(), name="api-review-assign"),
    path("audits/<int:audit_run_id>/suspects/<int:memory_id>/notes/", api.SuspectNotesApi.as_view(),
         name="api-suspect-notes"),
    path("audits/<int:audit_run_id>/export/csv/", api.AuditRunExportApi.as_view(), {"fmt": "csv"},
         name="api-audit-export-csv"),
    path("audits/<int:audit_run_id>/export/json/", api.AuditRunExportApi.as_view(), {"fmt": "json"},
         name="api-audit-export-json"),
]
