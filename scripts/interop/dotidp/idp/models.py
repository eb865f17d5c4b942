"""Append-only ledger of every token the token endpoint issued.

DOT deletes access-token rows when they are revoked or refreshed, so its own tables cannot say how
many tokens were ever issued. Tests count and list issued tokens from this table (table name
`idp_issuedtoken`; scripts/interop/count_tokens.py reads it with plain sqlite3)."""
from django.db import models


class IssuedToken(models.Model):
    KIND_ACCESS = "access"
    KIND_REFRESH = "refresh"

    kind = models.CharField(max_length=16)          # "access" | "refresh"
    value = models.TextField()
    client_id = models.CharField(max_length=100, blank=True, default="")
    grant_type = models.CharField(max_length=100, blank=True, default="")
    issued_at = models.DateTimeField(auto_now_add=True)
