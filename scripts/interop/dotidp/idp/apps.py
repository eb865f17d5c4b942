"""The `idp` app: holds the issued-token ledger (see ledger.py)."""
from django.apps import AppConfig


class IdpConfig(AppConfig):
    name = "idp"
    default_auto_field = "django.db.models.BigAutoField"
