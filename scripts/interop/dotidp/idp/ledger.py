"""Middleware recording every token issued by POST /o/token/ in the IssuedToken ledger, and the
test gate that can hold refresh requests at the token endpoint."""
import hashlib
import json
import os
import time
import uuid

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


class TokenGateMiddleware:
    """With IDP_TOKEN_GATE=DIR (stack up --token-gate DIR): while DIR/armed exists, every
    refresh_token grant at POST /o/token/ writes DIR/arrived-<id> and is held until DIR/release
    exists (at most 120 s) before the token endpoint handles it, so tests can act while a refresh
    request is in flight (e.g. kill its sender). When DIR/after exists too, the grant is handled
    first (the refresh token is rotated at the server) and its response is held instead: the
    arrived marker is written once the server has answered. DIR/grant, when it exists, names the
    grant type held instead of refresh_token (e.g. client_credentials)."""

    def __init__(self, get_response):
        self.get_response = get_response
        self.directory = os.environ.get("IDP_TOKEN_GATE", "")

    def _held_grant(self):
        try:
            with open(os.path.join(self.directory, "grant")) as handle:
                return handle.read().strip() or "refresh_token"
        except OSError:
            return "refresh_token"

    def _hold(self):
        marker = os.path.join(self.directory, f"arrived-{uuid.uuid4().hex}")
        with open(marker, "w") as handle:
            handle.write("arrived\n")
        deadline = time.monotonic() + 120
        while not os.path.exists(os.path.join(self.directory, "release")) and time.monotonic() < deadline:
            time.sleep(0.01)

    def __call__(self, request):
        if (self.directory and request.method == "POST" and request.path == "/o/token/"
                and os.path.exists(os.path.join(self.directory, "armed"))
                and request.POST.get("grant_type") == self._held_grant()):
            if os.path.exists(os.path.join(self.directory, "after")):
                response = self.get_response(request)
                self._hold()
                return response
            self._hold()
        return self.get_response(request)
