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


class SecurityHeadersMiddleware:
    """Content-Security-Policy (and Permissions-Policy) on every response.

    Scripts only from our own origin: no inline scripts or handlers anywhere (data for charts
    travels in ``json_script`` blocks, behaviour in static/js). Inline styles stay allowed
    because Plotly sets element styles at run time.
    """

    POLICY = (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; "
        "object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'"
    )

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", self.POLICY)
        response.headers.setdefault("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
        return response
