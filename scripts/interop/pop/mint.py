"""Mints a signed JWT assertion for the jwt-bearer tests (joserfc).

usage: mint.py --key PRIVATE.pem --iss ISS --sub SUB --aud AUD [--lifetime S]   (prints the JWT)
"""
import argparse
import secrets
import time

from joserfc import jwt
from joserfc.jwk import ECKey, RSAKey


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--key", required=True)
    ap.add_argument("--iss", required=True)
    ap.add_argument("--sub", required=True)
    ap.add_argument("--aud", required=True)
    ap.add_argument("--lifetime", type=int, default=300)
    args = ap.parse_args()
    data = open(args.key, "rb").read()
    try:
        key, alg = ECKey.import_key(data), "ES256"
    except Exception:
        key, alg = RSAKey.import_key(data), "RS256"
    now = int(time.time())
    claims = {"iss": args.iss, "sub": args.sub, "aud": args.aud, "iat": now, "exp": now + args.lifetime,
              "jti": secrets.token_urlsafe(12)}
    print(jwt.encode({"alg": alg, "typ": "JWT"}, claims, key, algorithms=[alg]))


if __name__ == "__main__":
    main()
