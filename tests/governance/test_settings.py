"""Settings come from the environment with safe defaults (checked in a clean subprocess)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json
from django.conf import settings
print(json.dumps({
    "engine": settings.DATABASES["default"]["ENGINE"],
    "name": str(settings.DATABASES["default"]["NAME"]),
    "host": settings.DATABASES["default"].get("HOST"),
    "eager": settings.CELERY_TASK_ALWAYS_EAGER,
    "broker": settings.CELERY_BROKER_URL,
    "debug": settings.DEBUG,
    "hsts": settings.SECURE_HSTS_SECONDS,
    "ssl_redirect": settings.SECURE_SSL_REDIRECT,
    "session_secure": settings.SESSION_COOKIE_SECURE,
    "csrf_secure": settings.CSRF_COOKIE_SECURE,
    "hosts": settings.ALLOWED_HOSTS,
    "secret_len": len(settings.SECRET_KEY),
    "storage": settings.STORAGES["default"]["BACKEND"],
}))
"""


def read_settings(tmp_path, **env):
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "CELERY_", "DATABASE_", "GOVERNANCE_"))
    }
    clean.update(
        {"DJANGO_SETTINGS_MODULE": "governance.settings", "GOVERNANCE_VAR_DIR": str(tmp_path)}
    )
    clean.update(env)
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup();" + PROBE],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_defaults_are_sqlite_in_process_and_hardened(tmp_path):
    values = read_settings(tmp_path)
    assert values["engine"] == "django.db.backends.sqlite3"
    assert values["name"] == str(tmp_path / "db.sqlite3")
    assert values["eager"] is True and values["broker"] == ""
    assert values["debug"] is False
    assert values["hsts"] == 31536000
    assert values["ssl_redirect"] is True
    assert values["session_secure"] is True and values["csrf_secure"] is True
    assert values["hosts"] == ["localhost", "127.0.0.1", "[::1]"]
    assert values["storage"] == "django.core.files.storage.FileSystemStorage"
    # A secret key was generated once and kept (0600) in the var dir.
    key_file = tmp_path / "secret_key"
    assert key_file.exists() and oct(key_file.stat().st_mode & 0o777) == "0o600"
    assert values["secret_len"] >= 50
    assert read_settings(tmp_path)["secret_len"] == values["secret_len"]


def test_environment_overrides(tmp_path):
    values = read_settings(
        tmp_path,
        DATABASE_URL="postgres://postgres@127.0.0.1:5432/somedb",
        CELERY_BROKER_URL="redis://127.0.0.1:6379/3",
        DJANGO_DEBUG="1",
        DJANGO_ALLOWED_HOSTS="a.example, b.example",
        DJANGO_SECRET_KEY="x" * 60,
    )
    assert values["engine"] == "django.db.backends.postgresql"
    assert values["name"] == "somedb" and values["host"] == "127.0.0.1"
    assert values["eager"] is False and values["broker"] == "redis://127.0.0.1:6379/3"
    assert values["debug"] is True
    assert (
        values["hsts"] == 0
        and values["ssl_redirect"] is False
        and values["session_secure"] is False
    )
    assert values["hosts"] == ["a.example", "b.example"]
    assert values["secret_len"] == 60


def test_bad_boolean_is_a_clear_error(tmp_path):
    clean = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    clean.update(
        {
            "DJANGO_SETTINGS_MODULE": "governance.settings",
            "DJANGO_DEBUG": "maybe",
            "GOVERNANCE_VAR_DIR": str(tmp_path),
        }
    )
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert "DJANGO_DEBUG must be a boolean" in result.stderr


def test_check_deploy_is_clean_with_production_variables(tmp_path):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "GOVERNANCE_"))}
    clean.update(
        {
            "DJANGO_SETTINGS_MODULE": "governance.settings",
            "DJANGO_SECRET_KEY": "k" * 20 + "Zq8!vT2#pL5@wN9$rB1&" + "m" * 20,
            "DJANGO_ALLOWED_HOSTS": "governance.example.org",
            "GOVERNANCE_VAR_DIR": str(tmp_path),
        }
    )
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=clean,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout
