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
    path("agent-endpoints/", api.AgentEndpointListApi.as_view(), name="api-agent-endpoints"),
    path("agent-endpoints/<int:endpoint_id>/", api.AgentEndpointDetailApi.as_view(), name="api-agent-endpoint"),
    path("reviews/", api.ReviewListApi.as_view(), name="api-reviews"),
    path("reviews/approve/", api.ReviewBulkApproveApi.as_view(), name="api-reviews-approve"),
    path("reviews/refute/", api.ReviewBulkRefuteApi.as_view(), name="api-reviews-refute"),
    path("reviews/<int:proposal_id>/approve/", api.ReviewApproveApi.as_view(), name="api-review-approve"),
    path("reviews/<int:proposal_id>/refute/", api.ReviewRefuteApi.as_view(), name="api-review-refute"),
]
