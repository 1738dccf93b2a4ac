from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

urlpatterns = [
    path("", include("orgs.urls")),
    path("", include("ledger.urls")),
    path("", include("audits.urls")),
    path("api/v1/", include("orgs.api_urls")),
    path("api/v1/", include("ledger.api_urls")),
    path("api/v1/", include("audits.api_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api-docs"),
    path("admin/", admin.site.urls),
]
