from django.contrib import admin
from django.contrib.auth.decorators import login_required
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework.permissions import IsAuthenticated

urlpatterns = [
    path("", include("orgs.urls")),
    path("", include("ledger.urls")),
    path("", include("audits.urls")),
    path("api/v1/", include("orgs.api_urls")),
    path("api/v1/", include("ledger.api_urls")),
    path("api/v1/", include("audits.api_urls")),
    # The API description maps the whole attack surface: for logged-in users only.
    path("api/schema/", SpectacularAPIView.as_view(permission_classes=[IsAuthenticated]), name="schema"),
    path("api/docs/", login_required(SpectacularSwaggerSplitView.as_view(url_name="schema",
                                                                       permission_classes=[IsAuthenticated])),
         name="api-docs"),
    path("admin/", admin.site.urls),
]
