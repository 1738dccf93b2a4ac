"""Audit API (DESIGN section 7): incidents, audits, reviews. One class per operation; each
validates its input, calls one service or selector scoped to the requester's organization,
and answers. Another organization's object is a 404; roles are checked by ``OrgMember``
through ``required_capability`` and again by the services."""

from __future__ import annotations

from django.core.exceptions import ObjectDoesNotExist
from django.http import Http404, HttpResponse
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from audits import casework, endpoints, exports, selectors, services
from audits.engine.agents import endpoint_connectors
from audits.engine.scenario import ValidationError as ScenarioValidationError
from audits.services.review import corrections_create_from_run
from audits.tasks import incidents_import_staged_task
from interchange.issues import issues_as_dicts
from ledger.api import ImportJobSerializer
from ledger.imports import import_job_stage, inline_limit
from ledger.models import Store
from orgs.api import DbIdField
from orgs.permissions import OrgMember, request_organization


def _store(request, store_id: int) -> Store:
    try:
        return Store.objects.get(pk=store_id, organization=request_organization(request))
    except Store.DoesNotExist:
        raise Http404 from None


def _issues_response(exc: ScenarioValidationError) -> Response:
    # At most MAX_KEPT_ISSUES issues are kept and sent; issue_count says how many there were.
    more = f" (the first {len(exc.issues)} are listed)" if exc.total > len(exc.issues) else ""
    return Response({"detail": f"{exc.total:,} problem(s) found{more}; nothing was imported.",
                     "issue_count": exc.total,
                     "issues": issues_as_dicts(exc.issues)}, status=status.HTTP_400_BAD_REQUEST)


class _Scoped(APIView):
    permission_classes = (OrgMember,)

    def handle_exception(self, exc):
        if isinstance(exc, ObjectDoesNotExist):
            exc = Http404()
        if isinstance(exc, ScenarioValidationError):
            return _issues_response(exc)
        return super().handle_exception(exc)


class IssueSerializer(serializers.Serializer):
    file = serializers.CharField()
    line = serializers.IntegerField(allow_null=True)
    field = serializers.CharField(allow_null=True)
    message = serializers.CharField()


# ============================================================================ incidents


class IncidentOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    external_id = serializers.CharField()
    store = serializers.IntegerField(source="store_id")
    query = serializers.CharField()
    output = serializers.CharField()
    retrieved = serializers.ListField(child=serializers.CharField())
    harm = serializers.JSONField(allow_null=True)
    harm_value = serializers.FloatField(allow_null=True)
    created_by = serializers.CharField(source="created_by.username", default=None)
    created_at = serializers.DateTimeField()


class IncidentListApi(_Scoped):
    class FilterSerializer(serializers.Serializer):
        store = DbIdField(required=False)

    @extend_schema(parameters=[FilterSerializer], responses=IncidentOutputSerializer(many=True))
    def get(self, request):
        f = self.FilterSerializer(data=request.query_params)
        f.is_valid(raise_exception=True)
        store = _store(request, f.validated_data["store"]) if "store" in f.validated_data else None
        qs = selectors.incident_list(organization=request_organization(request), store=store)
        return Response(IncidentOutputSerializer(qs, many=True).data)


class IncidentCreateApi(_Scoped):
    required_capability = "propose"

    class InputSerializer(serializers.Serializer):
        store = DbIdField()
        external_id = serializers.CharField(required=False, max_length=255)
        query = serializers.CharField()
        output = serializers.CharField(allow_blank=True)
        retrieved = serializers.ListField(child=serializers.CharField(), allow_empty=False)
        harm = serializers.JSONField(required=False)

    @extend_schema(request=InputSerializer, responses={201: IncidentOutputSerializer,
                                                       400: inline_serializer("IncidentIssues", {
                                                           "detail": serializers.CharField(),
                                                           "issues": IssueSerializer(many=True)})})
    def post(self, request):
        s = self.InputSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        d = s.validated_data
        inc = services.incident_create(store=_store(request, d["store"]), query=d["query"], output=d["output"],
                                       retrieved=d["retrieved"], harm=d.get("harm"),
                                       external_id=d.get("external_id"), user=request.user)
        return Response(IncidentOutputSerializer(inc).data, status=status.HTTP_201_CREATED)


class IncidentUploadApi(_Scoped):
    required_capability = "propose"
    parser_classes = (MultiPartParser, FormParser)

    class InputSerializer(serializers.Serializer):
        store = DbIdField()
        file = serializers.FileField()

    @extend_schema(request={"multipart/form-data": InputSerializer},
                   responses={201: IncidentOutputSerializer(many=True), 202: ImportJobSerializer})
    def post(self, request):
        s = self.InputSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        f = s.validated_data["file"]
        if f.size > inline_limit():
            # Too big to parse in the request: staged, a worker imports it; 202 with the job to poll.
            job = import_job_stage(store=_store(request, s.validated_data["store"]), chunks=f.chunks(),
                                   filename=f.name, kind="incidents", user=request.user,
                                       enqueue=incidents_import_staged_task.delay)
            return Response(ImportJobSerializer(job).data, status=status.HTTP_202_ACCEPTED)
        got = services.incidents_import(store=_store(request, s.validated_data["store"]), data=f.read(),
                                        filename=f.name, user=request.user)
        return Response(IncidentOutputSerializer(got, many=True).data, status=status.HTTP_201_CREATED)


class IncidentDetailApi(_Scoped):
    @extend_schema(responses=IncidentOutputSerializer)
    def get(self, request, incident_id: int):
        inc = selectors.incident_get(organization=request_organization(request), incident_id=incident_id)
        return Response(IncidentOutputSerializer(inc).data)


class ProposalOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    store = serializers.IntegerField(source="store_id")
    memory = serializers.IntegerField(source="memory_id")
    memory_external_id = serializers.CharField(source="memory.external_id")
    source = serializers.CharField()
    audit_run = serializers.IntegerField(source="audit_run_id", allow_null=True)
    kind = serializers.CharField(help_text="poison, or correction (an honest error to down-weight; issue 16)")
    correction_kind = serializers.CharField(help_text="outdated or honest-error for a correction; blank otherwise")
    corrected_by = serializers.IntegerField(source="corrected_by_id", allow_null=True,
                                            help_text="The memory that corrects it (an outdated record's newer version)")
    corrected_by_external_id = serializers.CharField(source="corrected_by.external_id", default=None)
    proposed_label = serializers.CharField(allow_blank=True)
    reason = serializers.CharField()
    scores = serializers.JSONField()
    proposed_by = serializers.CharField(source="proposed_by_actor")
    status = serializers.CharField()
    decision = serializers.CharField()
    decided_by = serializers.CharField(source="decided_by.username", default=None)
    decision_reason = serializers.CharField()
    decided_at = serializers.DateTimeField(allow_null=True)
    label = serializers.IntegerField(source="label_id", allow_null=True)
    transition = serializers.IntegerField(source="transition_id", allow_null=True,
                                          help_text="A correction's signed down-weight (provenance node), once appended")
    created_at = serializers.DateTimeField()
    assigned_to = serializers.CharField(source="assigned_to.username", default=None)



# ============================================================================ audits


class AuditRunOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    store = serializers.IntegerField(source="store_id")
    status = serializers.CharField()
    stage = serializers.CharField()
    replays_done = serializers.IntegerField()
    replays_total = serializers.IntegerField()
    percent = serializers.IntegerField(source="progress_percent")
    settings = serializers.SerializerMethodField()
    error = serializers.CharField()
    incidents = serializers.SerializerMethodField()
    created_by = serializers.CharField(source="created_by.username", default=None)
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)

    def get_incidents(self, run) -> list[int]:
        return list(run.incidents.values_list("pk", flat=True))

    def get_settings(self, run) -> dict:
        # Runs recorded before endpoints existed may hold a credential: never shown back.
        s = dict(run.settings or {})
        if isinstance(s.get("agent"), dict):
            s["agent"] = {k: ("(hidden)" if k in ("api_key", "api_key_env", "headers") else v)
                          for k, v in s["agent"].items()}
        return s


class AuditRunListApi(_Scoped):
    class FilterSerializer(serializers.Serializer):
        store = DbIdField(required=False)
        status = serializers.ChoiceField(choices=["pending", "running", "done", "failed"], required=False)

    @extend_schema(parameters=[FilterSerializer], responses=AuditRunOutputSerializer(many=True))
    def get(self, request):
        f = self.FilterSerializer(data=request.query_params)
        f.is_valid(raise_exception=True)
        store = _store(request, f.validated_data["store"]) if "store" in f.validated_data else None
        qs = selectors.audit_run_list(organization=request_organization(request), store=store, status=f.validated_data.get("status"))
        return Response(AuditRunOutputSerializer(qs.prefetch_related("incidents"), many=True).data)


class AuditRunCreateApi(_Scoped):
    required_capability = "propose"

    class InputSerializer(serializers.Serializer):
        store = DbIdField()
        incident_ids = serializers.ListField(child=DbIdField(), allow_empty=False)
        settings = serializers.JSONField(required=False, help_text=(
            "agent {connector, top_k, ...} or {endpoint: <registered agent endpoint name>, top_k}, alpha (0.6), fit_alpha (true: fit α to the store's evidence, CAS getting at most 1 − alpha), harm, budget (most agent calls the whole audit may make; null: 600, or 120 per incident when more; results.budget says what it cut), top_n, threshold (0.7), combine, "
            "consistency (rules|cross-encoder|onnx-conflict), group_ablation, group_thresholds, baselines"))

    @extend_schema(request=InputSerializer, responses={201: AuditRunOutputSerializer})
    def post(self, request):
        s = self.InputSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        d = s.validated_data
        run = services.audit_run_create(store=_store(request, d["store"]), incident_ids=d["incident_ids"],
                                        settings=d.get("settings") or {}, user=request.user)
        run.refresh_from_db()
        return Response(AuditRunOutputSerializer(run).data, status=status.HTTP_201_CREATED)


class AuditRunDetailApi(_Scoped):
    @extend_schema(responses=AuditRunOutputSerializer)
    def get(self, request, audit_run_id: int):
        run = selectors.audit_run_get(organization=request_organization(request), audit_run_id=audit_run_id)
        return Response(AuditRunOutputSerializer(run).data)


class AuditRunProgressApi(_Scoped):
    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        status = serializers.CharField()
        stage = serializers.CharField()
        stage_label = serializers.CharField()
        replays_done = serializers.IntegerField()
        replays_total = serializers.IntegerField()
        percent = serializers.IntegerField()
        finished = serializers.BooleanField()
        error = serializers.CharField()

    @extend_schema(responses=OutputSerializer)
    def get(self, request, audit_run_id: int):
        data = selectors.audit_run_progress(organization=request_organization(request), audit_run_id=audit_run_id)
        return Response(self.OutputSerializer(data).data)


class AuditRunSuspectsApi(_Scoped):
    class SuspectSerializer(serializers.Serializer):
        rank = serializers.IntegerField()
        memory_pk = serializers.IntegerField()
        external_id = serializers.CharField()
        text = serializers.CharField()
        ds = serializers.FloatField()
        cmis = serializers.FloatField()
        cmis_ci = serializers.ListField(child=serializers.FloatField())
        cas = serializers.FloatField()
        in_batch = serializers.BooleanField()
        per_event = serializers.JSONField()
        signals = serializers.JSONField()
        state = serializers.CharField()
        proposal_id = serializers.IntegerField(allow_null=True)
        blocked = serializers.CharField(allow_null=True, help_text="Why it cannot be proposed now (null: it can).")

    class OutputSerializer(serializers.Serializer):
        suspects = serializers.ListField(child=serializers.DictField())
        suspect_count = serializers.IntegerField()
        batch = serializers.ListField(child=serializers.CharField())
        residual = serializers.JSONField(allow_null=True)
        baselines = serializers.JSONField()
        graph = serializers.JSONField()
        events = serializers.JSONField()
        groups = serializers.JSONField()
        agent_calls = serializers.IntegerField(allow_null=True)
        alpha = serializers.FloatField(allow_null=True)

    class FilterSerializer(serializers.Serializer):
        limit = serializers.IntegerField(required=False, min_value=1, max_value=5000, default=200)

    @extend_schema(parameters=[FilterSerializer], responses=OutputSerializer)
    def get(self, request, audit_run_id: int):
        f = self.FilterSerializer(data=request.query_params)
        f.is_valid(raise_exception=True)
        data = selectors.suspects_for_run(organization=request_organization(request), audit_run_id=audit_run_id,
                                          limit=f.validated_data["limit"])
        data["suspects"] = self.SuspectSerializer(data["suspects"], many=True).data
        return Response(self.OutputSerializer(data).data)


class AuditRunProposeApi(_Scoped):
    """Propose the run's batch (or chosen suspects) for review; signs ``poison_suspect``."""

    required_capability = "propose"

    class InputSerializer(serializers.Serializer):
        memory_ids = serializers.ListField(child=DbIdField(), required=False)
        reason = serializers.CharField(required=False, allow_blank=True, default="")

    @extend_schema(request=InputSerializer, responses={201: ProposalOutputSerializer(many=True)})
    def post(self, request, audit_run_id: int):
        s = self.InputSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        run = selectors.audit_run_get(organization=request_organization(request), audit_run_id=audit_run_id)
        got = services.proposals_create_from_run(audit_run=run, user=request.user,
                                                 memory_ids=s.validated_data.get("memory_ids"),
                                                 reason=s.validated_data["reason"])
        return Response(ProposalOutputSerializer(got, many=True).data, status=status.HTTP_201_CREATED)


class AuditRunCorrectApi(_Scoped):
    """Propose the run's honest errors (or chosen ones) as corrections (issue 16). Nothing is
    signed until a reviewer approves; then the housekeeper signs a down-weight for each."""

    required_capability = "propose"

    class InputSerializer(serializers.Serializer):
        memory_ids = serializers.ListField(child=DbIdField(), required=False)
        reason = serializers.CharField(required=False, allow_blank=True, default="")

    class OutputSerializer(serializers.Serializer):
        proposals = ProposalOutputSerializer(many=True)
        skipped = serializers.DictField(child=serializers.CharField(), help_text="{memory id: why not proposed}")

    @extend_schema(request=InputSerializer, responses={201: OutputSerializer})
    def post(self, request, audit_run_id: int):
        s = self.InputSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        run = selectors.audit_run_get(organization=request_organization(request), audit_run_id=audit_run_id)
        got = corrections_create_from_run(audit_run=run, user=request.user,
                                          memory_ids=s.validated_data.get("memory_ids"),
                                          reason=s.validated_data["reason"])
        return Response(self.OutputSerializer({"proposals": list(got),
                                               "skipped": {str(k): v for k, v in got.skipped.items()}}).data,
                        status=status.HTTP_201_CREATED)


# ============================================================================ reviews


class ReviewListApi(_Scoped):
    class FilterSerializer(serializers.Serializer):
        status = serializers.ChoiceField(choices=["open", "applying", "approved", "refuted", "all"],
                                         required=False, default="open")
        store = DbIdField(required=False)
        assignee = serializers.RegexField(r"^(me|none|[1-9][0-9]{0,18})$", required=False,
                                          help_text="me, none, or a user id (issue 15: My queue)")

    @extend_schema(parameters=[FilterSerializer], responses=ProposalOutputSerializer(many=True))
    def get(self, request):
        f = self.FilterSerializer(data=request.query_params)
        f.is_valid(raise_exception=True)
        org = request_organization(request)
        store = _store(request, f.validated_data["store"]) if "store" in f.validated_data else None
        st = f.validated_data["status"]
        qs = selectors.proposal_queue(organization=org, status=None if st == "all" else st, store=store)
        assignee = f.validated_data.get("assignee")
        if assignee == "me":
            qs = qs.filter(assigned_to=request.user)
        elif assignee == "none":
            qs = qs.filter(assigned_to__isnull=True)
        elif assignee:
            qs = qs.filter(assigned_to_id=int(assignee))
        return Response(ProposalOutputSerializer(qs.select_related("assigned_to"), many=True).data)


class _DecisionInput(serializers.Serializer):
    reason = serializers.CharField(allow_blank=False, trim_whitespace=True)


class ReviewApproveApi(_Scoped):
    required_capability = "review"

    @extend_schema(request=_DecisionInput, responses=ProposalOutputSerializer)
    def post(self, request, proposal_id: int):
        s = _DecisionInput(data=request.data)
        s.is_valid(raise_exception=True)
        p = services.proposal_approve(organization=request_organization(request), proposal_id=proposal_id, user=request.user,
                                      reason=s.validated_data["reason"])
        return Response(ProposalOutputSerializer(p).data)


class ReviewRefuteApi(_Scoped):
    required_capability = "review"

    @extend_schema(request=_DecisionInput, responses=ProposalOutputSerializer)
    def post(self, request, proposal_id: int):
        s = _DecisionInput(data=request.data)
        s.is_valid(raise_exception=True)
        p = services.proposal_refute(organization=request_organization(request), proposal_id=proposal_id, user=request.user,
                                     reason=s.validated_data["reason"])
        return Response(ProposalOutputSerializer(p).data)


class _BulkInput(serializers.Serializer):
    ids = serializers.ListField(child=DbIdField(), allow_empty=False, max_length=1000)
    reason = serializers.CharField(allow_blank=False, trim_whitespace=True)


_BulkOutput = inline_serializer("ReviewBulkResult", {
    "decided": serializers.ListField(child=serializers.IntegerField()),
    "skipped": serializers.ListField(child=serializers.DictField())})


class ReviewBulkApproveApi(_Scoped):
    required_capability = "review"

    @extend_schema(request=_BulkInput, responses=_BulkOutput, operation_id="reviews_bulk_approve")
    def post(self, request):
        s = _BulkInput(data=request.data)
        s.is_valid(raise_exception=True)
        return Response(services.proposals_approve_bulk(organization=request_organization(request), proposal_ids=s.validated_data["ids"],
                                                        user=request.user, reason=s.validated_data["reason"]))


class ReviewBulkRefuteApi(_Scoped):
    required_capability = "review"

    @extend_schema(request=_BulkInput, responses=_BulkOutput, operation_id="reviews_bulk_refute")
    def post(self, request):
        s = _BulkInput(data=request.data)
        s.is_valid(raise_exception=True)
        return Response(services.proposals_refute_bulk(organization=request_organization(request), proposal_ids=s.validated_data["ids"],
                                                       user=request.user, reason=s.validated_data["reason"]))


# ============================================================================ agent endpoints


class AgentEndpointOutputSerializer(serializers.Serializer):
    """No secret field: only whether one is set (secrets are write-only)."""

    id = serializers.IntegerField()
    name = serializers.CharField()
    connector = serializers.CharField()
    base_url = serializers.CharField()
    model = serializers.CharField()
    options = serializers.JSONField()
    has_secret = serializers.BooleanField()
    created_by = serializers.CharField(source="created_by.username", default=None)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class _EndpointScoped(_Scoped):
    """Members read (analysts pick endpoints by name); org admins write."""

    @property
    def required_capability(self) -> str:
        return "member" if self.request.method in ("GET", "HEAD", "OPTIONS") else "admin"


class AgentEndpointListApi(_EndpointScoped):
    class InputSerializer(serializers.Serializer):
        name = serializers.CharField(max_length=64)
        connector = serializers.ChoiceField(choices=endpoint_connectors())
        base_url = serializers.CharField(max_length=500, help_text="openai-chat: …/v1; webhook: the POST URL")
        model = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")
        options = serializers.JSONField(required=False, default=dict)
        secret = serializers.CharField(max_length=4096, required=False, allow_blank=True, write_only=True,
                                       trim_whitespace=False, help_text="write-only; stored encrypted")

    @extend_schema(responses=AgentEndpointOutputSerializer(many=True))
    def get(self, request):
        qs = endpoints.agent_endpoint_list(organization=request_organization(request))
        return Response(AgentEndpointOutputSerializer(qs, many=True).data)

    @extend_schema(request=InputSerializer, responses={201: AgentEndpointOutputSerializer})
    def post(self, request):
        s = self.InputSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        d = dict(s.validated_data)
        d["secret"] = d.get("secret") or None
        ep = endpoints.agent_endpoint_create(organization=request_organization(request), user=request.user,
                                             request=request, **d)
        return Response(AgentEndpointOutputSerializer(ep).data, status=status.HTTP_201_CREATED)


class AgentEndpointDetailApi(_EndpointScoped):
    class InputSerializer(serializers.Serializer):
        name = serializers.CharField(max_length=64, required=False)
        connector = serializers.ChoiceField(choices=endpoint_connectors(), required=False)
        base_url = serializers.CharField(max_length=500, required=False)
        model = serializers.CharField(max_length=200, required=False, allow_blank=True)
        options = serializers.JSONField(required=False)
        secret = serializers.CharField(max_length=4096, required=False, allow_blank=True, write_only=True,
                                       trim_whitespace=False, help_text="write-only; omit to keep the stored one")
        clear_secret = serializers.BooleanField(required=False, default=False)

    def _get(self, request, endpoint_id: int):
        return endpoints.agent_endpoint_get(organization=request_organization(request), endpoint_id=endpoint_id)

    @extend_schema(responses=AgentEndpointOutputSerializer)
    def get(self, request, endpoint_id: int):
        return Response(AgentEndpointOutputSerializer(self._get(request, endpoint_id)).data)

    @extend_schema(request=InputSerializer, responses=AgentEndpointOutputSerializer)
    def patch(self, request, endpoint_id: int):
        ep = self._get(request, endpoint_id)
        s = self.InputSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        d = dict(s.validated_data)
        d["secret"] = d.get("secret") or None
        ep = endpoints.agent_endpoint_update(endpoint=ep, user=request.user, request=request, **d)
        return Response(AgentEndpointOutputSerializer(ep).data)

    @extend_schema(responses={204: None})
    def delete(self, request, endpoint_id: int):
        endpoints.agent_endpoint_delete(endpoint=self._get(request, endpoint_id), user=request.user, request=request)
        return Response(status=status.HTTP_204_NO_CONTENT)


# ============================================================================ case work (issue 15)
# Notes, assignment and exports; the logic is in audits.casework and audits.exports.


class NoteOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    memory = serializers.IntegerField(source="memory_id")
    proposal = serializers.IntegerField(source="proposal_id", allow_null=True)
    audit_run = serializers.IntegerField(source="audit_run_id", allow_null=True)
    author = serializers.CharField(source="author_label")
    body = serializers.CharField(help_text="The markdown as written; render it escaped.")
    created_at = serializers.DateTimeField()


class _NoteInput(serializers.Serializer):
    body = serializers.CharField(max_length=10_000, allow_blank=False, trim_whitespace=True)


class ProposalNotesApi(_Scoped):
    """GET: the notes on a proposal (and on its memory as a suspect of the proposal's audit);
    POST: add one (append-only: there is no edit or delete)."""

    @extend_schema(responses=NoteOutputSerializer(many=True))
    def get(self, request, proposal_id: int):
        org = request_organization(request)
        p = selectors.proposal_get(organization=org, proposal_id=proposal_id)
        return Response(NoteOutputSerializer(casework.notes_for_proposal(organization=org, proposal=p),
                                             many=True).data)

    @extend_schema(request=_NoteInput, responses={201: NoteOutputSerializer})
    def post(self, request, proposal_id: int):
        s = _NoteInput(data=request.data)
        s.is_valid(raise_exception=True)
        note = casework.note_add(organization=request_organization(request), user=request.user,
                                 body=s.validated_data["body"], proposal_id=proposal_id, request=request._request)
        return Response(NoteOutputSerializer(note).data, status=status.HTTP_201_CREATED)


class SuspectNotesApi(_Scoped):
    """GET: the notes on one suspect of an audit; POST: add one."""

    @extend_schema(responses=NoteOutputSerializer(many=True))
    def get(self, request, audit_run_id: int, memory_id: int):
        org = request_organization(request)
        suspect = casework.suspect_get(organization=org, audit_run_id=audit_run_id, memory_id=memory_id)
        return Response(NoteOutputSerializer(casework.notes_for_suspect(organization=org, suspect=suspect),
                                             many=True).data)

    @extend_schema(request=_NoteInput, responses={201: NoteOutputSerializer})
    def post(self, request, audit_run_id: int, memory_id: int):
        s = _NoteInput(data=request.data)
        s.is_valid(raise_exception=True)
        note = casework.note_add(organization=request_organization(request), user=request.user,
                                 body=s.validated_data["body"], audit_run_id=audit_run_id, memory_id=memory_id,
                                 request=request._request)
        return Response(NoteOutputSerializer(note).data, status=status.HTTP_201_CREATED)


class ReviewAssignApi(_Scoped):
    """POST {"assignee": <user id> | null}: assign an open proposal to a reviewer, or unassign."""

    required_capability = "review"

    class InputSerializer(serializers.Serializer):
        assignee = DbIdField(allow_null=True)

    @extend_schema(request=InputSerializer, responses=ProposalOutputSerializer)
    def post(self, request, proposal_id: int):
        s = self.InputSerializer(data=request.data)
        s.is_valid(raise_exception=True)
        p = casework.proposal_assign(organization=request_organization(request), proposal_id=proposal_id,
                                     assignee_id=s.validated_data["assignee"], user=request.user,
                                     request=request._request)
        return Response(ProposalOutputSerializer(p).data)


class AuditRunExportApi(_Scoped):
    """GET: the audit's ranked suspects (DS > 0) and the decisions on them, as CSV or JSON
    (``fmt`` from the URL). CSV cells that start like a formula are quoted."""

    @extend_schema(responses={(200, "text/csv"): str, (200, "application/json"): dict})
    def get(self, request, audit_run_id: int, fmt: str):
        org = request_organization(request)
        run = selectors.audit_run_get(organization=org, audit_run_id=audit_run_id)
        try:
            body, ctype, name = exports.audit_export(organization=org, run=run, fmt=fmt, user=request.user,
                                                     request=request._request)
        except exports.ExportNotReady as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        resp = HttpResponse(body, content_type=ctype)
        resp["Content-Disposition"] = f'attachment; filename="{name}"'
        return resp
