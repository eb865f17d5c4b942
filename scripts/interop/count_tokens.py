#!/usr/bin/env python3
"""Count or list the tokens an interop authorization server has issued (standard library only).

Reads the ledger table `idp_issuedtoken` of the AS's sqlite database, which records every token the
token endpoint returned, including tokens since revoked or rotated away (DOT itself deletes those).

usage:
  count_tokens.py [--state DIR | --db FILE] [--client ID] [--kind access|refresh|all]
                  [--values] [--json]

  default        print the number of issued ACCESS tokens (all clients, or --client's)
  --kind         which tokens to count/list (default access; "all" = access + refresh)
  --values       print the token values instead, one per line (for canary tests: grep logs for them)
  --json         print {"access": n, "refresh": n, "by_client": {client_id: {"access": n, "refresh": n}}}

--state defaults to $INTEROP_STATE or <repo>/.interop/state/default; the DB path comes from its
stack.json. Ledger schema: idp_issuedtoken(id, kind 'access'|'refresh', value, client_id,
grant_type, issued_at).
"""
import argparse
import json
import os
import sqlite3
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent


def db_path(args) -> str:
    if args.db:
        return args.db
    state = Path(args.state or os.environ.get("INTEROP_STATE") or REPO / ".interop" / "state" / "default")
    with open(state / "stack.json") as f:
        return json.load(f)["DB"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--state")
    ap.add_argument("--db")
    ap.add_argument("--client")
    ap.add_argument("--kind", choices=["access", "refresh", "all"], default="access")
    ap.add_argument("--values", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    con = sqlite3.connect(f"file:{db_path(args)}?mode=ro", uri=True, timeout=20)
    try:
        if args.json:
            by_client: dict = {}
            for cid, kind, n in con.execute(
                    "SELECT client_id, kind, COUNT(*) FROM idp_issuedtoken GROUP BY client_id, kind"):
                by_client.setdefault(cid, {"access": 0, "refresh": 0})[kind] = n
            total = {k: sum(c[k] for c in by_client.values()) for k in ("access", "refresh")}
            print(json.dumps({**total, "by_client": by_client}, sort_keys=True))
            return 0
        where, params = [], []
        if args.kind != "all":
            where.append("kind = ?")
            params.append(args.kind)
        if args.client is not None:
            where.append("client_id = ?")
            params.append(args.client)
        clause = (" WHERE " + " AND ".join(where)) if where else ""
        if args.values:
            for (value,) in con.execute(f"SELECT value FROM idp_issuedtoken{clause} ORDER BY id", params):
                print(value)
        else:
            print(con.execute(f"SELECT COUNT(*) FROM idp_issuedtoken{clause}", params).fetchone()[0])
        return 0
    finally:
        con.close()


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (OSError, sqlite3.Error, KeyError, ValueError) as e:
        print(f"count_tokens.py: {e}", file=sys.stderr)
        sys.exit(2)
