"""Ledger API (DESIGN section 7): stores, memories (bulk append), agent tokens, recall with
receipts, outcomes. Views validate, call one service or selector, and answer; everything is
scoped to the requester's organization (another organization's object is a 404), and agents
authenticate with a per-store bearer token that reaches its own store only.
"""

from __future__ import annotations

import json
from datetime import timedelta

from django.http import Http404
from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.authentication import SessionAuthentication, TokenAuthentication
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import BasePermission
from rest_framework.response import Response
from rest_framework.views import APIView

from interchange.importers import formats
from ledger.agent_tokens import (
    AgentTokenAuthentication,
    agent_token_create,
    agent_token_get_for_org,
    agent_token_list,
    agent_token_revoke,
)
from ledger.imports import memories_import, memories_import_upload
from ledger.models import AgentToken, ImportJob, Memory, ReceiptKey, Store
from ledger.recall import excluded_states, outcome_record, recall
from ledger.services import store_create
from ledger.signing import epochs_for, receipt_key_endorsement_for
from ledger.store_selectors import (
    MEMORY_STATES,
    import_job_get,
    memory_get,
    memory_search,
    receipt_get,
    store_get,
    store_list,
)
from ledger.verification import memory_verify
from orgs.api import StrictFloatField
from orgs.parsers import JSONParser
from orgs.permissions import OrgMember, membership_allows, request_membership, request_organization

AGENT_AUTH = (AgentTokenAuthentication, SessionAuthentication, TokenAuthentication)


class ImportJobSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    store = serializers.IntegerField(source="store_id")
    filename = serializers.CharField()
    status = serializers.CharField()
    total = serializers.IntegerField()
    done = serializers.IntegerField()
    errors = serializers.ListField(child=serializers.DictField(), help_text="The first 100 issues.")
    issue_count = serializers.IntegerField(help_text="Every issue found (errors keeps the first 100).")
    kind = serializers.CharField()
    format = serializers.CharField(help_text="The importer the registry chose (GET /api/v1/imports/formats/).")
    format_message = serializers.CharField()
    size_bytes = serializers.IntegerField()
    history_applied = serializers.IntegerField(help_text="Foreign history events (mem0 UPDATE/DELETE) signed.")
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)


class StoreSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    slug = serializers.CharField()
    description = serializers.CharField()
    exclude_suspect = serializers.BooleanField()
    four_eyes = serializers.BooleanField(source="organization.four_eyes", read_only=True,
                                         help_text="The organization's review policy (set by an org admin).")
    embedding_model = serializers.CharField()
    memory_count = serializers.IntegerField(required=False)
    created_at = serializers.DateTimeField()


# --------------------------------------------------------------------------- stores


class StoreListCreateApi(APIView):
    """GET lists the organization's stores; POST (org admin) creates one."""

    permission_classes = (OrgMember,)

    class CreateInputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "StoreCreateInput"

        name = serializers.CharField(max_length=200)
        slug = serializers.SlugField(max_length=64, required=False)
        description = serializers.CharField(required=False, allow_blank=True)
        exclude_suspect = serializers.BooleanField(required=False)
        embedding_model = serializers.CharField(required=False, allow_blank=True, max_length=300)

        def validate(self, attrs):
            # Four-eyes used to be a store flag the analyst creating the store chose; refuse it
            # loudly rather than ignore it, so nobody believes they switched it off.
            if "four_eyes" in self.initial_data:
                raise serializers.ValidationError({"four_eyes": [
                    "Four-eyes review is the organization's policy, set by an org admin "
                    "(/api/v1/organization/review-policy/), not a store setting."]})
            return attrs

    OutputSerializer = StoreSerializer

    def get_permissions(self):
        # Analysts upload memory stores (as in the UI); reviewers only decide labels.
        self.required_capability = "propose" if self.request.method == "POST" else "member"
        return super().get_permissions()

    @extend_schema(operation_id="stores_list", responses={200: StoreSerializer(many=True)})
    def get(self, request):
        return Response(self.OutputSerializer(store_list(organization=request_organization(request)), many=True).data)

    @extend_schema(operation_id="stores_create", request=CreateInputSerializer, responses={201: StoreSerializer})
    def post(self, request):
        data = self.CreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        store = store_create(organization=request_organization(request), **data.validated_data)
        return Response(self.OutputSerializer(store).data, status=status.HTTP_201_CREATED)


class StoreDetailApi(APIView):
    permission_classes = (OrgMember,)

    class OutputSerializer(StoreSerializer):
        class Meta:
            ref_name = "StoreDetailOutput"

        signed = serializers.IntegerField()
        quarantined = serializers.IntegerField()

    @extend_schema(responses={200: OutputSerializer})
    def get(self, request, store_id: int):
        store = store_get(organization=request_organization(request), store_id=store_id)
        memories = Memory.objects.filter(store=store)
        store.memory_count = memories.count()
        store.signed = memories.filter(chain_head__isnull=False).count()
        # Out of recall under the one exclusion rule (a suspect on a four-eyes organization is not).
        store.quarantined = memories.filter(epistemic_state__in=excluded_states(store)).count()
        return Response(self.OutputSerializer(store).data)


# --------------------------------------------------------------------------- memories


class MemorySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    external_id = serializers.CharField()
    ledger_id = serializers.CharField()
    store = serializers.IntegerField(source="store_id")
    text = serializers.CharField()
    metadata = serializers.DictField()
    created_at = serializers.DateTimeField()
    weight = serializers.FloatField()
    weight_q = serializers.IntegerField(source="live_weight_q")
    state = serializers.SerializerMethodField()
    signed = serializers.BooleanField(source="is_signed")
    chain_head = serializers.SerializerMethodField()

    def get_state(self, m: Memory) -> str | None:
        return m.epistemic_state or None

    def get_chain_head(self, m: Memory) -> str | None:
        return bytes(m.chain_head).hex() if m.chain_head is not None else None


class StoreMemoriesApi(APIView):
    """GET lists a store's memories (filters: state, weight_min/weight_max, q); POST appends a
    batch: a JSON list of {id, text, metadata?, created_at?} or a file upload (field ``file``:
    JSONL, JSON array or CSV). A bad batch is rejected whole with file/line/field issues."""

    # An agent token reads and appends to its own store (the drop-in client's add/get_all);
    # members need "propose" to append.
    authentication_classes = AGENT_AUTH
    permission_classes = (OrgMember,)
    parser_classes = (JSONParser, MultiPartParser, FormParser)

    class FilterSerializer(serializers.Serializer):
        class Meta:
            ref_name = "StoreMemoriesFilter"

        state = serializers.ChoiceField(choices=MEMORY_STATES, required=False)
        weight_min = serializers.FloatField(required=False, min_value=0)
        weight_max = serializers.FloatField(required=False, min_value=0)
        q = serializers.CharField(required=False, max_length=200)

    OutputSerializer = MemorySerializer

    class RejectedSerializer(serializers.Serializer):
        class Meta:
            ref_name = "StoreMemoriesRejected"

        detail = serializers.CharField()
        job = ImportJobSerializer()
        errors = serializers.ListField(child=serializers.DictField())

    def get_permissions(self):
        if isinstance(self.request.auth, AgentToken):
            return [StoreAgentOrMember()]
        self.required_capability = "propose" if self.request.method == "POST" else "member"
        return super().get_permissions()

    @extend_schema(
        operation_id="store_memories_list",
        parameters=[OpenApiParameter("state", str, enum=list(MEMORY_STATES)),
                    OpenApiParameter("weight_min", float), OpenApiParameter("weight_max", float),
                    OpenApiParameter("q", str), OpenApiParameter("limit", int), OpenApiParameter("offset", int)],
        responses={200: MemorySerializer(many=True)},
    )
    def get(self, request, store_id: int):
        store = _agent_store(request, store_id)
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        qs = memory_search(store=store, **filters.validated_data).select_related("store")
        if isinstance(request.auth, AgentToken):
            # An agent reads what recall would serve it: never a quarantined memory.
            qs = qs.exclude(epistemic_state__in=excluded_states(store))
        paginator = LimitOffsetPagination()
        page = paginator.paginate_queryset(qs, request, view=self)
        return paginator.get_paginated_response(self.OutputSerializer(page, many=True).data)

    @extend_schema(
        operation_id="store_memories_append",
        request={"application/json": inline_serializer("MemoryRecordIn", {
                     "id": serializers.CharField(), "text": serializers.CharField(),
                     "metadata": serializers.DictField(required=False),
                     "created_at": serializers.CharField(required=False)}, many=True),
                 "multipart/form-data": inline_serializer("MemoryFileIn", {
                     "file": serializers.FileField(),
                     "format": serializers.CharField(required=False, help_text=(
                         "An importer name from GET /api/v1/imports/formats/; detected from the file when absent."))})},
        responses={202: ImportJobSerializer, 400: RejectedSerializer},
    )
    def post(self, request, store_id: int):
        store = _agent_store(request, store_id)
        user = None if isinstance(request.auth, AgentToken) else request.user
        upload = request.FILES.get("file")
        fmt = request.query_params.get("format") or (request.data.get("format") if upload is not None else None)
        if upload is not None:
            filename = upload.name
            job = memories_import_upload(store=store, upload=upload, user=user, fmt=fmt or None)
        elif isinstance(request.data, list):
            # One record per line, so an issue's "line" is the record's position in the list.
            filename = "request.jsonl"
            # ASCII escapes: a lone surrogate in the request reaches the parser, which names it,
            # instead of failing to encode here.
            data = "\n".join(json.dumps(r) for r in request.data).encode("utf-8")
            # A JSON list is MemAudit's own record shape, whatever keys its metadata holds.
            job = memories_import(store=store, data=data, filename=filename, user=user, fmt=fmt or "memaudit-jsonl")
        else:
            return Response({"detail": "Send a JSON list of memories or a multipart upload with a 'file' field."},
                            status=status.HTTP_400_BAD_REQUEST)
        if job.status == ImportJob.Status.FAILED:
            shown = len(job.errors)
            more = f" (the first {shown} are listed)" if job.issue_count > shown else ""
            body = {"detail": f"{filename}: {job.issue_count:,} issue(s){more}; nothing was imported.",
                    "job": ImportJobSerializer(job).data, "errors": job.errors}
            return Response(body, status=status.HTTP_400_BAD_REQUEST)
        return Response(ImportJobSerializer(job).data, status=status.HTTP_202_ACCEPTED)


class ImportFormatsApi(APIView):
    """The importer registry: every format an upload may be in, with a short example."""

    permission_classes = (OrgMember,)

    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "ImportFormat"

        name = serializers.CharField()
        title = serializers.CharField()
        kind = serializers.ChoiceField(choices=["memories", "incidents"])
        extensions = serializers.ListField(child=serializers.CharField())
        example = serializers.CharField()
        notes = serializers.CharField()

    @extend_schema(responses={200: OutputSerializer(many=True)})
    def get(self, request):
        return Response(self.OutputSerializer([f.describe() for f in formats()], many=True).data)


class ImportJobDetailApi(APIView):
    permission_classes = (OrgMember,)

    @extend_schema(responses={200: ImportJobSerializer})
    def get(self, request, job_id: int):
        return Response(ImportJobSerializer(import_job_get(organization=request_organization(request), job_id=job_id)).data)


class MemoryDetailApi(APIView):
    """One memory with its provenance chain, label chain and a fresh verification result."""

    permission_classes = (OrgMember,)

    class OutputSerializer(MemorySerializer):
        class Meta:
            ref_name = "MemoryDetailOutput"

        chains = serializers.DictField()
        verification = serializers.DictField()

    @extend_schema(responses={200: OutputSerializer})
    def get(self, request, memory_id: int):
        memory = memory_get(organization=request_organization(request), memory_id=memory_id)
        genesis = getattr(memory, "genesis", None) if memory.is_signed else None
        memory.chains = {
            "genesis": None if genesis is None else {
                "weight_q": genesis.weight_q, "epoch": genesis.epoch, "time": genesis.time,
                "hash": bytes(genesis.entry_hash).hex()},
            "provenance": [{"seq": n.seq, "prev_weight_q": n.prev_weight_q, "new_weight_q": n.new_weight_q,
                            "valence_q": n.valence_q, "eta_q": n.eta_q, "evidence": n.evidence, "epoch": n.epoch,
                            "time": n.time, "hash": bytes(n.entry_hash).hex()}
                           for n in memory.provenance.order_by("seq")],
            "transitions": [{"seq": t.seq, "new_weight_q": t.new_weight_q,
                             "provenance_hash": bytes(t.provenance_hash).hex(), "epoch": t.epoch, "time": t.time}
                            for t in memory.transitions.order_by("seq")],
            "labels": [{"seq": lab.seq, "label": lab.label, "reason": lab.reason, "evidence": lab.evidence,
                        "actor": lab.actor, "epoch": lab.epoch, "time": lab.time, "hash": bytes(lab.entry_hash).hex()}
                       for lab in memory.labels.order_by("seq")],
        }
        findings = memory_verify(memory, cached=False) if memory.is_signed else []
        memory.verification = {"ok": memory.is_signed and not findings, "signed": memory.is_signed,
                               "findings": [str(f) for f in findings]}
        return Response(self.OutputSerializer(memory).data)


# --------------------------------------------------------------------------- agent tokens


class AgentTokenSerializer(serializers.Serializer):
    """An agent token as listed: never the token itself (only its hash is stored)."""

    class Meta:
        ref_name = "AgentToken"

    id = serializers.IntegerField()
    name = serializers.CharField()
    store = serializers.IntegerField(source="store_id")
    store_name = serializers.CharField(source="store.name")
    created_at = serializers.DateTimeField()
    created_by = serializers.CharField(source="created_by.username", default=None, allow_null=True)
    expires_at = serializers.DateTimeField(allow_null=True)
    last_used_at = serializers.DateTimeField(allow_null=True)
    revoked_at = serializers.DateTimeField(allow_null=True)
    state = serializers.SerializerMethodField()

    def get_state(self, token) -> str:
        return token.state(timezone.now())


class StoreTokenCreateApi(APIView):
    """Org admins mint a per-store agent token. The token is in this response only."""

    permission_classes = (OrgMember,)
    required_capability = "admin"

    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "StoreTokenCreateInput"

        name = serializers.CharField(max_length=100)
        expires_in_days = serializers.IntegerField(min_value=1, max_value=3650, required=False,
                                                   help_text="Default: AGENT_TOKEN_DEFAULT_DAYS (90).")

    class OutputSerializer(AgentTokenSerializer):
        class Meta:
            ref_name = "StoreTokenCreateOutput"

        token = serializers.CharField(help_text="Shown once; only its SHA-256 is stored.")

    @extend_schema(request=InputSerializer, responses={201: OutputSerializer})
    def post(self, request, store_id: int):
        store = store_get(organization=request_organization(request), store_id=store_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        days = data.validated_data.get("expires_in_days")
        token, raw = agent_token_create(store=store, name=data.validated_data["name"], created_by=request.user,
                                        expires_at=timezone.now() + timedelta(days=days) if days else None,
                                        request=request._request)
        token.token = raw
        return Response(self.OutputSerializer(token).data, status=status.HTTP_201_CREATED)


class AgentTokenListApi(APIView):
    """Org admins list the organization's agent tokens (all stores; ``?store=`` narrows)."""

    permission_classes = (OrgMember,)
    required_capability = "admin"

    @extend_schema(responses={200: AgentTokenSerializer(many=True)},
                   parameters=[OpenApiParameter("store", int, description="Only this store's tokens.")])
    def get(self, request):
        store = request.query_params.get("store")
        try:
            store_id = int(store) if store else None
        except ValueError:
            raise serializers.ValidationError({"store": "A store id (an integer)."}) from None
        tokens = agent_token_list(organization=request_organization(request), store_id=store_id)
        paginator = LimitOffsetPagination()
        page = paginator.paginate_queryset(tokens, request, view=self)
        return paginator.get_paginated_response(AgentTokenSerializer(page, many=True).data)


class AgentTokenRevokeApi(APIView):
    """Org admins revoke an agent token; its next request gets a 401."""

    permission_classes = (OrgMember,)
    required_capability = "admin"

    @extend_schema(request=None, responses={200: AgentTokenSerializer})
    def post(self, request, token_id: int):
        token = agent_token_get_for_org(organization=request_organization(request), token_id=token_id)
        agent_token_revoke(token=token, actor=request.user, request=request._request)
        token.refresh_from_db()
        return Response(AgentTokenSerializer(token).data)


# --------------------------------------------------------------------------- recall and outcomes


class StoreAgentOrMember(BasePermission):
    """An agent token (its own store only; checked by the view) or an organization member."""

    message = "Authenticate with this store's agent token or as a member of its organization."

    def has_permission(self, request, view) -> bool:
        if isinstance(request.auth, AgentToken):
            return True
        return membership_allows(request_membership(request), "member")


def _agent_store(request, store_id: int) -> Store:
    """The store the caller may use: the token's own store, or one of the member's organization."""
    if isinstance(request.auth, AgentToken):
        if request.auth.store_id != store_id:
            raise Http404("No such store.")
        return request.auth.store
    return store_get(organization=request_organization(request), store_id=store_id)




class ReceiptSerializer(serializers.Serializer):
    body = serializers.DictField()
    signature = serializers.CharField()
    results = serializers.ListField(child=serializers.DictField())


class RecallApi(APIView):
    """Top-k memories for a query, scored cosine x live weight over the quarantine-aware
    projection, each adopted only after its chains verify; with a signed Merkle receipt."""

    authentication_classes = AGENT_AUTH
    permission_classes = (StoreAgentOrMember,)

    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "RecallInput"

        query = serializers.CharField(max_length=10_000)
        k = serializers.IntegerField(min_value=1, max_value=100, default=5)

    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "RecallOutput"

        receipt_id = serializers.IntegerField()
        store = serializers.IntegerField()
        k = serializers.IntegerField()
        results = serializers.ListField(child=serializers.DictField())
        excluded = serializers.ListField(child=serializers.DictField(),
                                         help_text="Candidates skipped because their chains failed to verify (an alert), "
                                                   "or because a concurrent write changed them during every attempt "
                                                   "(no alert), and the quarantined memories that would have ranked (id, external_id, "
                                                   "label; never the text). Not part of the signed receipt.")
        receipt = ReceiptSerializer()
        verification = serializers.DictField(
            help_text="How the results' chains were verified (not part of the signed receipt): 'ahead' by a "
                      "worker's record covering each one's exact live state, made at log position 'verified_through'; "
                      "'earlier' by an earlier recall in this process (same state); 'now' = candidates verified "
                      "during this recall (failures included); 'log_position' of the index; 'attempts': more than 1 "
                      "when candidates moved under a concurrent write and the index was read again.")
        elapsed_ms = serializers.FloatField()

    @extend_schema(operation_id="store_recall", request=InputSerializer, responses={200: OutputSerializer})
    def post(self, request, store_id: int):
        store = _agent_store(request, store_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        result = recall(store=store, query=data.validated_data["query"], k=data.validated_data["k"])
        # ``recall`` returns exactly OutputSerializer's fields, in JSON types (tests/ledger/test_recall_prepare.py
        # checks it); serializing it again through the nested DictFields cost ~1 ms of CPU per recall.
        return Response(result)


def _receipt_for(request, receipt_id: int):
    if isinstance(request.auth, AgentToken):
        receipt = receipt_get(organization=request.auth.organization, receipt_id=receipt_id)
        if receipt.store_id != request.auth.store_id:
            raise Http404("No such receipt.")
        return receipt
    return receipt_get(organization=request_organization(request), receipt_id=receipt_id)


class ReceiptDetailApi(APIView):
    authentication_classes = AGENT_AUTH
    permission_classes = (StoreAgentOrMember,)

    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "ReceiptDetailOutput"

        id = serializers.IntegerField()
        store = serializers.IntegerField(source="store_id")
        created_at = serializers.DateTimeField()
        receipt = ReceiptSerializer(source="body")
        receipt_public_key = serializers.CharField()
        # The chain a holder of the receipt checks with the pinned trust anchor (epoch 1's key):
        # anchor -> epochs (each endorsed by the one before) -> this endorsement of the receipt key.
        receipt_key_endorsement = serializers.DictField(allow_null=True)
        epochs = serializers.ListField(child=serializers.DictField())
        outcomes = serializers.ListField(child=serializers.DictField())

    @extend_schema(responses={200: OutputSerializer})
    def get(self, request, receipt_id: int):
        receipt = _receipt_for(request, receipt_id)
        key = ReceiptKey.objects.filter(organization_id=receipt.organization_id,
                                        key_id=receipt.body["body"]["key_id"]).first()
        endorsement = receipt_key_endorsement_for(receipt.organization, receipt.body["body"])
        data = {
            "id": receipt.pk, "store_id": receipt.store_id, "created_at": receipt.created_at, "body": receipt.body,
            "receipt_public_key": bytes(key.public_key).hex() if key else "",
            "receipt_key_endorsement": endorsement.to_json() if endorsement is not None else None,
            "epochs": [e.to_json() for e in epochs_for(receipt.organization)],
            "outcomes": [
                {"id": o.pk, "memory": o.memory.ledger_id, "reward": o.reward_q / 1000, "created_at": o.created_at,
                 "applied": o.transition_id is not None}
                for o in receipt.outcomes.select_related("memory", "memory__store").order_by("pk")
            ],
        }
        return Response(self.OutputSerializer(data).data)


class OutcomeCreateApi(APIView):
    """Report the reward for one memory of a receipt (append-only; the housekeeper turns
    outcomes into signed weight transitions)."""

    authentication_classes = AGENT_AUTH
    permission_classes = (StoreAgentOrMember,)

    class InputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "OutcomeCreateInput"

        memory = serializers.CharField(help_text="The receipt's memory id (store/external id) or the external id.")
        reward = StrictFloatField(min_value=-1.0, max_value=1.0)

    class OutputSerializer(serializers.Serializer):
        class Meta:
            ref_name = "OutcomeCreateOutput"

        id = serializers.IntegerField()
        receipt = serializers.IntegerField(source="receipt_id")
        memory = serializers.CharField(source="memory.ledger_id")
        reward = serializers.FloatField()
        created_at = serializers.DateTimeField()

    @extend_schema(operation_id="receipt_outcome_create", request=InputSerializer, responses={201: OutputSerializer})
    def post(self, request, receipt_id: int):
        receipt = _receipt_for(request, receipt_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        outcome = outcome_record(receipt=receipt, **data.validated_data)
        outcome.reward = outcome.reward_q / 1000
        return Response(self.OutputSerializer(outcome).data, status=status.HTTP_201_CREATED)
