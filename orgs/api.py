from __future__ import annotations

import logging

from django.core.exceptions import ObjectDoesNotExist
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import InterfaceError, OperationalError
from django.http import Http404
from drf_spectacular.openapi import AutoSchema as SpectacularAutoSchema
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response
from rest_framework.views import APIView
from rest_framework.views import exception_handler as drf_exception_handler

from orgs.permissions import OrgMember, request_membership
from orgs.selectors import activity_list, membership_list
from orgs.services import organization_review_policy_set

logger = logging.getLogger(__name__)


class DbIdField(serializers.IntegerField):
    """A primary key in a request: bounded, so a huge number is a 400 rather than a database error."""

    def __init__(self, **kwargs):
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", 2**63 - 1)
        super().__init__(**kwargs)


class StrictFloatField(serializers.FloatField):
    """A number; JSON true/false are refused instead of read as 1.0/0.0."""

    def to_internal_value(self, data):
        if isinstance(data, bool):
            self.fail("invalid")
        return super().to_internal_value(data)


class AutoSchema(SpectacularAutoSchema):
    """Names nested ``InputSerializer``/``OutputSerializer`` components after their API class
    (``MeApiOutput``), so one-class-per-operation APIs do not collide in the schema."""

    def get_serializer_name(self, serializer, direction):
        name = super().get_serializer_name(serializer, direction)
        outer = type(serializer).__qualname__.split(".")[:-1]
        return "".join(outer) + name if outer and not name.startswith("".join(outer)) else name


def exception_handler(exc, context):
    """DRF's handler, plus Django's ValidationError as a 400 naming the fields.

    Services raise Django's ValidationError; the API answers it as clearly as a form would.
    """
    if isinstance(exc, DjangoValidationError):
        detail = exc.message_dict if hasattr(exc, "error_dict") else {"detail": exc.messages}
        return Response(detail, status=400)
    if isinstance(exc, (Http404, ObjectDoesNotExist)):  # selectors raise the model's DoesNotExist
        return Response({"detail": "Not found."}, status=404)
    if isinstance(exc, (OperationalError, InterfaceError)):
        # The database is unreachable (restart, failover): say so and let the client retry,
        # never answer from partial state.
        logger.warning("database unavailable during %s: %s", context.get("view").__class__.__name__, exc)
        return Response({"detail": "The database is temporarily unavailable; retry shortly."}, status=503,
                        headers={"Retry-After": "5"})
    return drf_exception_handler(exc, context)


class MeApi(APIView):
    permission_classes = [OrgMember]

    class OutputSerializer(serializers.Serializer):
        username = serializers.CharField()
        organization = serializers.CharField()
        organization_slug = serializers.CharField()
        role = serializers.CharField()

    @extend_schema(responses=OutputSerializer, summary="The current user, organization and role")
    def get(self, request):
        membership = request_membership(request)
        data = {
            "username": request.user.username,
            "organization": membership.organization.name,
            "organization_slug": membership.organization.slug,
            "role": membership.role,
        }
        return Response(self.OutputSerializer(data).data)


class MemberListApi(APIView):
    permission_classes = [OrgMember]
    required_capability = "admin"

    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        username = serializers.CharField(source="user.username")
        role = serializers.CharField()
        is_active = serializers.BooleanField()
        invited_by = serializers.CharField(source="invited_by.username", default=None, allow_null=True)
        created_at = serializers.DateTimeField()

    @extend_schema(responses=OutputSerializer(many=True), summary="Members of the organization (org admins)")
    def get(self, request):
        memberships = membership_list(organization=request_membership(request).organization)
        return Response(self.OutputSerializer(memberships, many=True).data)


class ReviewPolicyApi(APIView):
    """GET: the organization's review policy (any member); PUT: set it (org admins)."""

    permission_classes = [OrgMember]

    class InputSerializer(serializers.Serializer):
        four_eyes = serializers.BooleanField()

    class OutputSerializer(serializers.Serializer):
        four_eyes = serializers.BooleanField()

    def get_permissions(self):
        self.required_capability = "admin" if self.request.method == "PUT" else "member"
        return super().get_permissions()

    @extend_schema(responses=OutputSerializer, summary="The organization's review policy")
    def get(self, request):
        return Response(self.OutputSerializer(request_membership(request).organization).data)

    @extend_schema(request=InputSerializer, responses=OutputSerializer,
                   summary="Set the organization's review policy (org admins)")
    def put(self, request):
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        org = organization_review_policy_set(organization=request_membership(request).organization,
                                             four_eyes=data.validated_data["four_eyes"], user=request.user,
                                             request=request._request)
        return Response(self.OutputSerializer(org).data)
class ActivityListApi(APIView):
    """The organization's activity trail, newest first (org admins): invitations, joins, role
    changes, deactivations and removals, agent tokens, logins, password changes, exports."""

    permission_classes = [OrgMember]
    required_capability = "admin"

    class FilterSerializer(serializers.Serializer):
        verb = serializers.CharField(required=False, max_length=64, help_text="A verb or its prefix (member.).")
        actor = serializers.CharField(required=False, max_length=200, help_text="Part of the actor label.")
        since = serializers.DateTimeField(required=False)
        until = serializers.DateTimeField(required=False)

    class OutputSerializer(serializers.Serializer):
        id = serializers.IntegerField()
        created_at = serializers.DateTimeField()
        actor = serializers.CharField(source="actor_label")
        verb = serializers.CharField()
        target = serializers.CharField()
        detail = serializers.DictField()
        ip = serializers.CharField(allow_null=True)
        ledger_ref = serializers.CharField()

    @extend_schema(parameters=[FilterSerializer], responses=OutputSerializer(many=True),
                   summary="Activity trail of the organization (org admins)")
    def get(self, request):
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        rows = activity_list(organization=request_membership(request).organization, **filters.validated_data)
        paginator = LimitOffsetPagination()
        page = paginator.paginate_queryset(rows, request, view=self)
        return paginator.get_paginated_response(self.OutputSerializer(page, many=True).data)
