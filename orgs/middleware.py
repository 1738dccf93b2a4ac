from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from orgs.selectors import membership_for_request


class CurrentOrganizationMiddleware:
    """Puts the requester's organization and membership on the request.

    A user in several organizations picks one (stored in the session); every queryset in
    views and APIs is then scoped through ``request.organization``.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.membership = None
        request.organization = None
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            membership = membership_for_request(user=user, session=request.session)
            if membership is not None:
                request.membership = membership
                request.organization = membership.organization
        return self.get_response(request)
