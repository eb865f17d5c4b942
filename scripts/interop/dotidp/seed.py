"""Deterministic seeding of the interop authorization server: one user and fixed clients. Idempotent.

Run (from scripts/interop/dotidp):  IDP_DB=... python seed.py
The stack runs it once into a pre-migrated template database that each run then copies.
"""
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "idp.settings")
import django  # noqa: E402

django.setup()
from django.contrib.auth import get_user_model  # noqa: E402
from oauth2_provider.models import get_application_model  # noqa: E402

User = get_user_model()
App = get_application_model()

user, _ = User.objects.get_or_create(username="alice", defaults={"email": "alice@example.test"})
user.set_password("alice-pw")
user.save()

REDIRECT = "http://127.0.0.1:9999/cb"
# DOT allows one grant type per application, hence one client per flow.
CLIENTS = [
    # client_id, type, grant, secret, redirect_uris, skip_authorization, algorithm
    ("svc", App.CLIENT_CONFIDENTIAL, App.GRANT_CLIENT_CREDENTIALS, "svc-secret", "", False, ""),
    # same as svc, meant for client_secret_post tests (DOT accepts both methods from every client)
    ("svcpost", App.CLIENT_CONFIDENTIAL, App.GRANT_CLIENT_CREDENTIALS, "svcpost-secret", "", False, ""),
    # id and secret that need RFC 6749 s2.3.1 form-encoding inside HTTP Basic
    ("svc odd:1", App.CLIENT_CONFIDENTIAL, App.GRANT_CLIENT_CREDENTIALS, "p@ss w:rd+/%é", "", False, ""),
    # the resource server's own credentials for /o/introspect/
    ("rs", App.CLIENT_CONFIDENTIAL, App.GRANT_CLIENT_CREDENTIALS, "rs-secret", "", False, ""),
    ("webapp", App.CLIENT_CONFIDENTIAL, App.GRANT_AUTHORIZATION_CODE, "webapp-secret", REDIRECT, True, "RS256"),
    ("cli", App.CLIENT_PUBLIC, App.GRANT_AUTHORIZATION_CODE, "", REDIRECT, True, "RS256"),
    # like cli, but the person sees a consent page (so a test can deny: error=access_denied)
    ("cliconsent", App.CLIENT_PUBLIC, App.GRANT_AUTHORIZATION_CODE, "", REDIRECT, False, "RS256"),
    # password grant: the quickest way for tests to mint a refresh token
    ("pwd", App.CLIENT_CONFIDENTIAL, App.GRANT_PASSWORD, "pwd-secret", "", False, ""),
    # public password client: refresh tokens usable with token_endpoint_auth_method "none"
    ("pwdpub", App.CLIENT_PUBLIC, App.GRANT_PASSWORD, "", "", False, ""),
    ("tv", App.CLIENT_PUBLIC, App.GRANT_DEVICE_CODE, "", "", False, ""),
]
for cid, ctype, grant, secret, redirects, skip, alg in CLIENTS:
    App.objects.filter(client_id=cid).delete()
    App.objects.create(client_id=cid, name=cid, client_type=ctype, authorization_grant_type=grant,
                       client_secret=secret, redirect_uris=redirects, skip_authorization=skip,
                       algorithm=alg, user=user if grant != App.GRANT_CLIENT_CREDENTIALS else None)
print("seeded:", [c[0] for c in CLIENTS])
