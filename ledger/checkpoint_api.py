"""Witness endpoints (public, no account): the newest checkpoint, consistency proofs, cosignatures.

Transparency-log witnesses and outside auditors hold no MemAudit account, so these answer
anyone, as a CT log does. They reveal the log's size and Merkle hashes only (no entry, no
memory text); a cosignature is stored only if it verifies under a witness key an org admin
configured, over a checkpoint this log signed.
"""

from __future__ import annotations

import base64

from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.parsers import BaseParser
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from ledger.checkpoints import MAX_NOTE_BYTES, checkpoint_latest, consistency_proof_get, cosignatures_accept
from orgs.models import Organization


class NoteParser(BaseParser):
    """A signed note as the raw ``text/plain`` body (at most MAX_NOTE_BYTES)."""

    media_type = "text/plain"

    def parse(self, stream, media_type=None, parser_context=None):
        return stream.read(MAX_NOTE_BYTES + 1) if stream is not None else b""


def _organization(slug: str) -> Organization:
    org = Organization.objects.filter(slug=slug).first()
    if org is None:
        raise Http404("no such log")
    return org


class _Public(APIView):
    authentication_classes = ()
    permission_classes = (AllowAny,)


class CheckpointApi(_Public):
    """GET: the organization's newest tree head as a C2SP checkpoint note, with the cosignatures
    of its configured witnesses (``text/plain``)."""

    @extend_schema(operation_id="checkpoint_get", responses={(200, "text/plain"): str})
    def get(self, request, org: str):
        latest = checkpoint_latest(_organization(org))
        if latest is None:
            raise Http404("no checkpoint signed yet")
        response = HttpResponse(latest[1].encode(), content_type="text/plain; charset=utf-8")
        response["Cache-Control"] = "no-store"
        return response


class ConsistencyProofApi(_Public):
    """GET ``?old=M&new=N``: the RFC 6962 consistency proof between two tree sizes (base64 hashes)."""

    @extend_schema(
        operation_id="consistency_proof_get",
        parameters=[OpenApiParameter("old", int, required=True), OpenApiParameter("new", int, required=True)],
        responses={200: inline_serializer("ConsistencyProof", {
            "old": serializers.IntegerField(), "new": serializers.IntegerField(),
            "proof": serializers.ListField(child=serializers.CharField())})},
    )
    def get(self, request, org: str):
        organization = _organization(org)
        try:
            old, new = int(request.query_params.get("old", "")), int(request.query_params.get("new", ""))
        except ValueError:
            return Response({"detail": "old and new must be integers"}, status=status.HTTP_400_BAD_REQUEST)
        try:
            p = consistency_proof_get(organization, old=old, new=new)
        except ValidationError as exc:
            return Response({"detail": exc.messages[0]}, status=status.HTTP_400_BAD_REQUEST)
        return Response({"old": p.old, "new": p.new, "proof": [base64.b64encode(h).decode() for h in p.proof]})


class CosignatureApi(_Public):
    """POST the checkpoint note with a witness's ``cosignature/v1`` line(s) (``text/plain``)."""

    parser_classes = (NoteParser,)

    @extend_schema(operation_id="checkpoint_cosign", request={"text/plain": str},
                   responses={201: inline_serializer("CosignatureAccepted", {
                       "stored": serializers.IntegerField(), "witnesses": serializers.ListField(
                           child=serializers.CharField())})})
    def post(self, request, org: str):
        organization = _organization(org)
        try:
            created = cosignatures_accept(organization=organization, note=request.data or b"")
        except ValidationError as exc:
            return Response({"detail": exc.messages[0]}, status=status.HTTP_400_BAD_REQUEST)
        return Response({"stored": len(created), "witnesses": [c.witness.name for c in created]},
                        status=status.HTTP_201_CREATED)
