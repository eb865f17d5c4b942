"""WSGI entry point (gunicorn idp.wsgi)."""
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "idp.settings")
application = get_wsgi_application()
