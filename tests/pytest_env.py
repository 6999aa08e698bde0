"""Environment for the test run, set before Django reads its settings (loaded with -p).

Production hardening stays the default; tests talk plain HTTP to the test client and to
the live server, and Playwright's sync API runs an event loop in the test thread.
"""

import os

os.environ.setdefault("DJANGO_SECURE_SSL_REDIRECT", "0")
os.environ.setdefault("DJANGO_SECURE_COOKIES", "0")
os.environ.setdefault("DJANGO_STATIC_MANIFEST", "0")
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
os.environ.setdefault("GOVERNANCE_VAR_DIR", os.path.join(os.getcwd(), "var", "test"))
