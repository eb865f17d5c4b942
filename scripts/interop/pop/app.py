"""A strict authorization server + resource server for proof of possession and workload identity:
private_key_jwt client authentication and the jwt-bearer grant (RFC 7523), token exchange (RFC 8693),
DPoP (RFC 9449) at the token endpoint and at the resource. JOSE through joserfc (the Authlib
project's JOSE library); every check is the RFC's, and a failed check answers the RFC's error.

Clients are registered by files the tests write, read again at every request:
  $POP_STATE/clients/<client_id>.json
    {"auth": "private_key_jwt" | "none",
     "key_pem": "<public key PEM>",              # private_key_jwt
     "assertion_audience": "token_endpoint" | "issuer",   # default token_endpoint
     "dpop_nonce": false,                        # demand a DPoP nonce at the token endpoint
     "downgrade": false,                         # answer token_type Bearer even to a DPoP proof
     "ttl": 3600}
  $POP_STATE/issuers/<name>.pem                  # keys trusted for jwt-bearer assertions (iss = name)
  $POP_STATE/anonymous-jwt-bearer                # present: a jwt-bearer grant may name no client at
                                                 # all (RFC 7523 §3.1: client authentication is optional)
  $POP_STATE/gha-request-token                   # what GET /gha/token wants as its bearer token
A token exchange for requested_token_type ...:id-jag plays the person's enterprise IdP (SPEC §9.9): the
subject is an ID token (subject_token_type ...:id_token) signed by a trusted issuer, whose aud is
the exchanging client; the answer is an ID-JAG (typ oauth-id-jag+jwt, iss "idjag", trusted for
jwt-bearer, aud the requested audience) with token_type N_A and no expires_in.
GET /gha/token?audience=A plays the GitHub Actions OIDC token service (ACTIONS_ID_TOKEN_REQUEST_URL):
it answers {"value": JWT} signed by issuer "gha" (trusted for jwt-bearer).
Every decision is appended to $POP_STATE/ledger.jsonl (one JSON object a line, never a secret
value: tokens appear as SHA-256 digests).

Run: uvicorn app:app --fd N (scripts/interop/stack up --pop)
"""
import base64
import hashlib
import json
import os
import secrets
import threading
import time
from pathlib import Path
from urllib.parse import parse_qsl

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, RSAKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

STATE = Path(os.environ.get("POP_STATE", "."))
PORT = os.environ.get("INTEROP_PORT", "0")
ISSUER = f"http://127.0.0.1:{PORT}"
TOKEN_URL = f"{ISSUER}/token"
RS_NONCE = os.environ.get("POP_RS_NONCE", "1") == "1"
LEEWAY = 60
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG_TYPE = "urn:ietf:params:oauth:token-type:id-jag"

_lock = threading.Lock()
_seen_jti: dict[str, float] = {}  # (kind:iss:jti) -> expiry; replay refused while it could be valid
_tokens: dict[str, dict] = {}  # access token -> info
_nonces: dict[str, float] = {}  # issued DPoP nonces -> expiry


class Form:
    """An application/x-www-form-urlencoded body (RFC 6749 appendix B), strictly parsed."""

    def __init__(self, body: bytes):
        self.pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, strict_parsing=bool(body))

    def get(self, name, default=None):
        return next((v for k, v in self.pairs if k == name), default)

    def getlist(self, name):
        return [v for k, v in self.pairs if k == name]

    def keys(self):
        return {k for k, _ in self.pairs}

    def __contains__(self, name):
        return name in self.keys()

    def __getitem__(self, name):
        return self.get(name)


async def read_form(request: Request) -> Form:
    return Form(await request.body())


_GHA_KEY = ECKey.generate_key("P-256")
if os.environ.get("POP_STATE"):
    (STATE / "issuers").mkdir(parents=True, exist_ok=True)
    (STATE / "issuers" / "gha.pem").write_bytes(_GHA_KEY.as_pem(private=False))
_ID_JAG_KEY = ECKey.generate_key("P-256")
if os.environ.get("POP_STATE"):
    (STATE / "issuers" / "idjag.pem").write_bytes(_ID_JAG_KEY.as_pem(private=False))


def digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()[:16]


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def ledger(event: dict) -> None:
    event["t"] = time.time()
    with _lock, open(STATE / "ledger.jsonl", "a") as f:
        f.write(json.dumps(event) + "\n")


def oauth_error(status: int, error: str, description: str, headers: dict | None = None) -> JSONResponse:
    ledger({"event": "refused", "error": error, "why": description})
    return JSONResponse({"error": error, "error_description": description}, status_code=status, headers=headers)


def remember_jti(kind: str, issuer: str, jti: str, exp: float) -> bool:
    """False when (kind, issuer, jti) was seen and could still be valid (RFC 7523 §3 point 7)."""
    now = time.time()
    key = f"{kind}:{issuer}:{jti}"
    with _lock:
        for k in [k for k, e in _seen_jti.items() if e < now - LEEWAY]:
            del _seen_jti[k]
        if key in _seen_jti:
            return False
        _seen_jti[key] = exp
    return True


def load_client(client_id: str) -> dict | None:
    if not client_id or "/" in client_id or client_id.startswith("."):
        return None
    path = STATE / "clients" / f"{client_id}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def import_public(pem: str):
    """An EC or RSA public key from PEM."""
    data = pem.encode()
    try:
        return ECKey.import_key(data)
    except Exception:
        return RSAKey.import_key(data)


def verify_signed_jwt(value: str, key, allowed: list[str]):
    """Signature check with the algorithms that fit the key only (no none, no HMAC)."""
    algs = [a for a in allowed if (a == "ES256") == isinstance(key, ECKey)]
    return jwt.decode(value, key, algorithms=algs)


def check_claims(claims: dict, *, iss: str | None, sub: str | None, audiences: list[str], max_lifetime: int | None):
    """RFC 7523 §3: iss, sub, aud, exp (and iat not in the future); returns a problem or None."""
    now = time.time()
    if iss is not None and claims.get("iss") != iss:
        return "iss is not the client id" if iss == sub else "iss is wrong"
    if sub is not None and claims.get("sub") != sub:
        return "sub is wrong"
    if iss is None and not claims.get("sub"):
        return "sub is missing"
    aud = claims.get("aud")
    auds = aud if isinstance(aud, list) else [aud]
    if not any(a in audiences for a in auds):
        return f"aud {aud!r} does not name this server"
    exp = claims.get("exp")
    if not isinstance(exp, (int, float)):
        return "exp is missing"
    if exp <= now:
        return "the assertion has expired"
    iat = claims.get("iat")
    if iat is not None and (not isinstance(iat, (int, float)) or iat > now + 5):
        return "iat is in the future"
    if max_lifetime is not None:
        if not isinstance(iat, (int, float)):
            return "iat is missing"
        if exp - iat > max_lifetime:
            return f"the assertion lives {exp - iat} s, more than {max_lifetime} s"
    if not isinstance(claims.get("jti"), str) or not claims["jti"]:
        return "jti is missing"
    return None


async def client_authentication(form, request: Request):
    """Returns (client_id, client, None) or (None, None, error response). Secrets are refused."""
    if "client_secret" in form or request.headers.get("authorization", "").lower().startswith("basic "):
        return None, None, oauth_error(401, "invalid_client", "this server takes no client secrets")
    client_id = form.get("client_id")
    assertion = form.get("client_assertion")
    if assertion is not None or form.get("client_assertion_type") is not None:
        if form.get("client_assertion_type") != ASSERTION_TYPE or not assertion:
            return None, None, oauth_error(401, "invalid_client", "client_assertion_type is not jwt-bearer")
        try:
            unverified = json.loads(base64.urlsafe_b64decode(assertion.split(".")[1] + "=="))
        except Exception:
            return None, None, oauth_error(401, "invalid_client", "the client assertion is not a JWT")
        claimed = unverified.get("sub")
        if client_id is not None and client_id != claimed:
            return None, None, oauth_error(401, "invalid_client", "client_id differs from the assertion's sub")
        client = load_client(claimed)
        if not client or client.get("auth") != "private_key_jwt":
            return None, None, oauth_error(401, "invalid_client", "unknown client or not a private_key_jwt client")
        try:
            token = verify_signed_jwt(assertion, import_public(client["key_pem"]), ["ES256", "RS256", "PS256"])
        except JoseError as e:
            return None, None, oauth_error(401, "invalid_client", f"bad client assertion signature: {e}")
        if client.get("kid") and token.header.get("kid") != client["kid"]:
            return None, None, oauth_error(401, "invalid_client", "kid is not the registered key id")
        want = ISSUER if client.get("assertion_audience") == "issuer" else TOKEN_URL
        problem = check_claims(token.claims, iss=claimed, sub=claimed, audiences=[want], max_lifetime=60)
        if problem:
            return None, None, oauth_error(401, "invalid_client", problem)
        if not remember_jti("client", claimed, token.claims["jti"], token.claims["exp"]):
            return None, None, oauth_error(401, "invalid_client", "client assertion jti reused")
        ledger({"event": "client_auth", "client": claimed, "method": "private_key_jwt",
                "alg": token.header.get("alg"), "kid": token.header.get("kid"), "jti": token.claims["jti"],
                "aud": token.claims["aud"], "lifetime": token.claims["exp"] - token.claims.get("iat", 0),
                "path": request.url.path})
        return claimed, client, None
    client = load_client(client_id or "")
    if not client or client.get("auth") != "none":
        return None, None, oauth_error(401, "invalid_client", "client authentication required")
    return client_id, client, None


def new_nonce() -> str:
    nonce = secrets.token_urlsafe(16)
    with _lock:
        _nonces[nonce] = time.time() + 300
    return nonce


def nonce_valid(nonce) -> bool:
    with _lock:
        return isinstance(nonce, str) and _nonces.get(nonce, 0) > time.time()


def verify_dpop(request: Request, proof: str, *, htu: str, access_token: str | None, want_nonce: bool):
    """RFC 9449 §4.3. Returns (jkt, None) or (None, (error, description, nonce_error))."""
    if not proof or proof.count(".") != 2 or "," in proof:
        return None, ("invalid_dpop_proof", "not one compact JWS", False)
    try:
        header = json.loads(base64.urlsafe_b64decode(proof.split(".")[0] + "=="))
    except Exception:
        return None, ("invalid_dpop_proof", "the header is not JSON", False)
    if header.get("typ") != "dpop+jwt":
        return None, ("invalid_dpop_proof", "typ is not dpop+jwt", False)
    if header.get("alg") != "ES256":
        return None, ("invalid_dpop_proof", "alg is not ES256", False)
    jwk = header.get("jwk")
    if not isinstance(jwk, dict) or "d" in jwk or jwk.get("kty") != "EC" or jwk.get("crv") != "P-256":
        return None, ("invalid_dpop_proof", "jwk is not a public P-256 key", False)
    try:
        key = ECKey.import_key(jwk)
        token = jwt.decode(proof, key, algorithms=["ES256"])
    except JoseError as e:
        return None, ("invalid_dpop_proof", f"bad signature: {e}", False)
    c = token.claims
    if c.get("htm") != request.method:
        return None, ("invalid_dpop_proof", f"htm {c.get('htm')!r} is not {request.method}", False)
    if c.get("htu") != htu:
        return None, ("invalid_dpop_proof", f"htu {c.get('htu')!r} is not {htu}", False)
    iat = c.get("iat")
    if not isinstance(iat, (int, float)) or abs(iat - time.time()) > LEEWAY:
        return None, ("invalid_dpop_proof", "iat is not recent", False)
    if not isinstance(c.get("jti"), str) or not c["jti"]:
        return None, ("invalid_dpop_proof", "jti is missing", False)
    if access_token is not None:
        if c.get("ath") != b64url(hashlib.sha256(access_token.encode()).digest()):
            return None, ("invalid_dpop_proof", "ath is not the access token's hash", False)
    elif "ath" in c:
        return None, ("invalid_dpop_proof", "ath on a token request", False)
    if want_nonce and not nonce_valid(c.get("nonce")):
        return None, ("use_dpop_nonce", "a DPoP nonce is required", True)
    if not remember_jti("dpop", key.thumbprint(), c["jti"], iat + LEEWAY):
        return None, ("invalid_dpop_proof", "DPoP proof jti reused", False)
    ledger({"event": "dpop_proof", "jkt": key.thumbprint(), "htm": c["htm"], "htu": c["htu"], "jti": c["jti"],
            "nonce": c.get("nonce"), "ath": "ath" in c, "path": request.url.path})
    return key.thumbprint(), None


def issue(client_id: str, client: dict, *, subject: str, scope: str | None, jkt: str | None, extra: dict) -> dict:
    access = secrets.token_urlsafe(24)
    ttl = int(client.get("ttl", 3600))
    bound = jkt is not None and not client.get("downgrade")
    info = {"client": client_id, "sub": subject, "scope": scope or "read", "exp": time.time() + ttl,
            "jkt": jkt if bound else None, **extra}
    with _lock:
        _tokens[access] = info
    ledger({"event": "issued", "client": client_id, "sub": subject, "token": digest(access),
            "token_type": "DPoP" if bound else "Bearer", "jkt": jkt, **extra})
    answer = {"access_token": access, "token_type": "DPoP" if bound else "Bearer", "expires_in": ttl,
              "scope": info["scope"]}
    if extra.get("issued_token_type"):
        answer["issued_token_type"] = extra["issued_token_type"]
    return answer


async def token(request: Request):
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/x-www-form-urlencoded":
        return oauth_error(400, "invalid_request", "the body must be a form")
    form = await read_form(request)
    if any(len(form.getlist(k)) > 1 for k in form.keys() if k not in ("resource", "audience")):
        return oauth_error(400, "invalid_request", "a parameter is repeated")
    names_client = any(k in form for k in ("client_id", "client_secret", "client_assertion", "client_assertion_type")) \
        or "authorization" in request.headers
    if form.get("grant_type") == JWT_BEARER and not names_client and (STATE / "anonymous-jwt-bearer").exists():
        client_id, client, error = None, {}, None  # an unidentified client (RFC 7523 §3.1)
    else:
        client_id, client, error = await client_authentication(form, request)
    if error:
        return error
    jkt = None
    proofs = request.headers.getlist("dpop")
    if len(proofs) > 1:
        return oauth_error(400, "invalid_dpop_proof", "more than one DPoP header")
    if proofs:
        jkt, problem = verify_dpop(request, proofs[0], htu=TOKEN_URL, access_token=None,
                                   want_nonce=bool(client.get("dpop_nonce")))
        if problem:
            error, description, nonce_error = problem
            headers = {"DPoP-Nonce": new_nonce()} if nonce_error else None
            return oauth_error(400, error, description, headers)
    grant = form.get("grant_type")
    scope = form.get("scope")
    if grant == "client_credentials":
        return JSONResponse(issue(client_id, client, subject=client_id, scope=scope, jkt=jkt, extra={"grant": grant}))
    if grant == JWT_BEARER:
        assertion = form.get("assertion") or ""
        try:
            unverified = json.loads(base64.urlsafe_b64decode(assertion.split(".")[1] + "=="))
            issuer = unverified.get("iss")
            if not isinstance(issuer, str) or "/" in issuer or issuer.startswith("."):
                raise ValueError
            key = import_public((STATE / "issuers" / f"{issuer}.pem").read_text())
            verified = verify_signed_jwt(assertion, key, ["ES256", "RS256", "PS256"])
        except (JoseError, ValueError, OSError, IndexError) as e:
            return oauth_error(400, "invalid_grant", f"the assertion does not verify ({type(e).__name__})")
        problem = check_claims(verified.claims, iss=issuer, sub=None, audiences=[TOKEN_URL, ISSUER], max_lifetime=None)
        if problem:
            return oauth_error(400, "invalid_grant", problem)
        if not remember_jti("grant", issuer, verified.claims["jti"], verified.claims["exp"]):
            return oauth_error(400, "invalid_grant", "assertion jti reused")
        ledger({"event": "jwt_bearer", "client": client_id, "iss": issuer, "sub": verified.claims["sub"],
                "jti": verified.claims["jti"]})
        return JSONResponse(issue(client_id, client, subject=verified.claims["sub"], scope=scope, jkt=jkt,
                                  extra={"grant": "jwt_bearer"}))
    if grant == TOKEN_EXCHANGE and form.get("requested_token_type") == ID_JAG_TYPE:
        return id_jag(form, client_id)
    if grant == TOKEN_EXCHANGE:
        subject_token = form.get("subject_token")
        if form.get("subject_token_type") != ACCESS_TOKEN_TYPE or not subject_token:
            return oauth_error(400, "invalid_request", "subject_token and an access_token subject_token_type needed")
        with _lock:
            info = _tokens.get(subject_token)
        if not info or info["exp"] <= time.time():
            return oauth_error(400, "invalid_grant", "the subject token is not active")
        requested = form.get("requested_token_type") or ACCESS_TOKEN_TYPE
        if requested != ACCESS_TOKEN_TYPE:
            return oauth_error(400, "invalid_request", "only access tokens are issued")
        extra = {"grant": "token_exchange", "subject_token": digest(subject_token),
                 "audience": form.getlist("audience"), "resource": form.getlist("resource"),
                 "issued_token_type": ACCESS_TOKEN_TYPE}
        actor = form.get("actor_token")
        if actor:
            with _lock:
                actor_info = _tokens.get(actor)
            if form.get("actor_token_type") != ACCESS_TOKEN_TYPE or not actor_info:
                return oauth_error(400, "invalid_grant", "the actor token is not active")
            extra["actor"] = digest(actor)
        return JSONResponse(issue(client_id, client, subject=info["sub"], scope=scope, jkt=jkt, extra=extra))
    return oauth_error(400, "unsupported_grant_type", f"grant_type {grant!r}")


def id_jag(form: Form, client_id: str | None) -> JSONResponse:
    """The IdP's exchange of a person's ID token for an ID-JAG (SPEC §9.9)."""
    subject = form.get("subject_token") or ""
    if form.get("subject_token_type") != ID_TOKEN_TYPE or not subject:
        return oauth_error(400, "invalid_request", "an ID-JAG is issued for an id_token subject")
    audience, resource = form.getlist("audience"), form.getlist("resource")
    if len(audience) != 1 or len(resource) != 1:
        return oauth_error(400, "invalid_request", "one audience and one resource needed")
    try:
        unverified = json.loads(base64.urlsafe_b64decode(subject.split(".")[1] + "=="))
        issuer = unverified.get("iss")
        if not isinstance(issuer, str) or "/" in issuer or issuer.startswith("."):
            raise ValueError
        key = import_public((STATE / "issuers" / f"{issuer}.pem").read_text())
        verified = verify_signed_jwt(subject, key, ["ES256", "RS256", "PS256"])
    except (JoseError, ValueError, OSError, IndexError) as e:
        return oauth_error(400, "invalid_grant", f"the ID token does not verify ({type(e).__name__})")
    problem = check_claims(verified.claims, iss=issuer, sub=None, audiences=[client_id], max_lifetime=None)
    if problem:
        return oauth_error(400, "invalid_grant", problem)
    now = int(time.time())
    claims = {"iss": "idjag", "sub": verified.claims["sub"], "aud": audience[0], "resource": resource[0],
              "client_id": client_id, "iat": now, "exp": now + 300, "jti": secrets.token_urlsafe(12)}
    value = jwt.encode({"alg": "ES256", "typ": "oauth-id-jag+jwt"}, claims, _ID_JAG_KEY)
    ledger({"event": "id_jag", "client": client_id, "sub": claims["sub"], "audience": audience[0],
            "resource": resource[0], "subject_token": digest(subject)})
    return JSONResponse({"access_token": value, "issued_token_type": ID_JAG_TYPE, "token_type": "N_A"})


async def revoke(request: Request):
    form = await read_form(request)
    client_id, _, error = await client_authentication(form, request)
    if error:
        return error
    with _lock:
        info = _tokens.get(form.get("token") or "")
        if info and info["client"] == client_id:
            del _tokens[form["token"]]
    ledger({"event": "revoked", "client": client_id, "token": digest(form.get("token") or "")})
    return JSONResponse({})


def resource_challenge(status: int, error: str, description: str, nonce: bool = False) -> JSONResponse:
    headers = {"WWW-Authenticate": f'DPoP error="{error}", error_description="{description}", algs="ES256"'}
    if nonce:
        headers["DPoP-Nonce"] = new_nonce()
    ledger({"event": "resource_refused", "error": error, "why": description})
    return JSONResponse({"error": error}, status_code=status, headers=headers)


async def resource(request: Request):
    scheme, _, value = request.headers.get("authorization", "").partition(" ")
    with _lock:
        info = _tokens.get(value.strip())
    if not value or not info or info["exp"] <= time.time():
        return resource_challenge(401, "invalid_token", "unknown or expired token")
    if info["jkt"]:
        if scheme != "DPoP":
            return resource_challenge(401, "invalid_token", "a DPoP-bound token needs the DPoP scheme")
        proofs = request.headers.getlist("dpop")
        if len(proofs) != 1:
            return resource_challenge(401, "invalid_dpop_proof", "exactly one DPoP proof needed")
        htu = f"{ISSUER}{request.url.path}"
        jkt, problem = verify_dpop(request, proofs[0], htu=htu, access_token=value.strip(), want_nonce=RS_NONCE)
        if problem:
            return resource_challenge(401, problem[0], problem[1], nonce=problem[2])
        if jkt != info["jkt"]:
            return resource_challenge(401, "invalid_token", "the proof key is not the token's key")
    elif scheme != "Bearer":
        return resource_challenge(401, "invalid_token", "a bearer token needs the Bearer scheme")
    ledger({"event": "resource", "client": info["client"], "token": digest(value.strip()), "jkt": info["jkt"],
            "method": request.method, "path": request.url.path})
    return JSONResponse({"client": info["client"], "sub": info["sub"], "jkt": info["jkt"],
                         "scheme": scheme, "method": request.method})


async def metadata(request: Request):
    return JSONResponse({
        "issuer": ISSUER, "token_endpoint": TOKEN_URL, "revocation_endpoint": f"{ISSUER}/revoke",
        "token_endpoint_auth_methods_supported": ["private_key_jwt", "none"],
        "token_endpoint_auth_signing_alg_values_supported": ["ES256", "RS256", "PS256"],
        "revocation_endpoint_auth_methods_supported": ["private_key_jwt", "none"],
        "grant_types_supported": ["client_credentials", JWT_BEARER, TOKEN_EXCHANGE],
        "dpop_signing_alg_values_supported": ["ES256"],
    })


async def gha_token(request: Request):
    try:
        expected = (STATE / "gha-request-token").read_text().strip()
    except OSError:
        expected = None
    if not expected or request.headers.get("authorization") != f"bearer {expected}":
        ledger({"event": "gha_refused"})
        return JSONResponse({"message": "bad request token"}, status_code=401)
    now = int(time.time())
    claims = {"iss": "gha", "sub": "repo:example/app:ref:refs/heads/main", "aud": request.query_params.get("audience"),
              "iat": now, "nbf": now, "exp": now + 300, "jti": secrets.token_urlsafe(12)}
    value = jwt.encode({"alg": "ES256", "typ": "JWT"}, claims, _GHA_KEY)
    ledger({"event": "gha_token", "aud": claims["aud"], "jti": claims["jti"]})
    return JSONResponse({"count": 1, "value": value})


async def health(request: Request):
    return JSONResponse({"ok": True})


app = Starlette(routes=[
    Route("/.well-known/oauth-authorization-server", metadata),
    Route("/token", token, methods=["POST"]),
    Route("/revoke", revoke, methods=["POST"]),
    Route("/resource/{rest:path}", resource, methods=["GET", "POST", "PUT", "DELETE"]),
    Route("/gha/token", gha_token),
    Route("/healthz", health),
])
