"""Middleware recording every token issued by POST /o/token/ in the IssuedToken ledger."""
import hashlib
import json

from oauth2_provider.models import get_access_token_model

from .models import IssuedToken


class TokenLedgerMiddleware:
    """Records access/refresh token values of successful token responses (all grants)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if request.method == "POST" and request.path == "/o/token/" and response.status_code == 200:
            try:
                self.record(request, json.loads(response.content))
            except (ValueError, TypeError):
                pass
        return response

    @staticmethod
    def record(request, body):
        access = body.get("access_token")
        if not isinstance(access, str):
            return
        client_id = ""
        checksum = hashlib.sha256(access.encode("utf-8")).hexdigest()
        token = get_access_token_model().objects.filter(token_checksum=checksum).select_related("application").first()
        if token is not None and token.application is not None:
            client_id = token.application.client_id
        grant = request.POST.get("grant_type", "")
        rows = [IssuedToken(kind=IssuedToken.KIND_ACCESS, value=access, client_id=client_id, grant_type=grant)]
        refresh = body.get("refresh_token")
        if isinstance(refresh, str):
            rows.append(IssuedToken(kind=IssuedToken.KIND_REFRESH, value=refresh, client_id=client_id, grant_type=grant))
        IssuedToken.objects.bulk_create(rows)
