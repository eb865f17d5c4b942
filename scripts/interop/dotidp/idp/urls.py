"""URLs: DOT under /o/ (issuer http://127.0.0.1:PORT/o), a login page, RFC 8414 at the root too,
and /healthz for readiness polling."""
from django.contrib.auth import views as auth_views
from django.http import JsonResponse
from django.urls import include, path
from oauth2_provider import urls as oauth2_urls


def healthz(request):
    return JsonResponse({"ok": True})


urlpatterns = [
    path("healthz", healthz),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("o/", include(oauth2_urls)),
    # RFC 8414 at the origin root as well. Quirk kept on purpose: the root
    # /.well-known/oauth-authorization-server reports issuer http://127.0.0.1:PORT (no /o), which does
    # NOT match the OIDC issuer; the correct RFC 8414 URL is /.well-known/oauth-authorization-server/o.
    path("", include((oauth2_urls.metadata_urlpatterns, "oauth2_provider_root"))),
]
