"""Which inherited variables bash-local keeps from commands: the default list by name and
by value, a custom list with glob patterns, and the URL check turned off."""

from __future__ import annotations

import pytest

from dsh_bash_local import DEFAULT_SCRUB
from dsh_bash_local._scrub import Scrub

DEFAULT = Scrub(DEFAULT_SCRUB, urls=True)

SCRUBBED = [
    ("OPENAI_API_KEY", "sk-1"),
    ("GITHUB_TOKEN", "ghp_1"),
    ("AWS_SECRET_ACCESS_KEY", "x"),
    ("AWS_ACCESS_KEY_ID", "AKIA1"),
    ("AWS_SESSION_TOKEN", "x"),
    ("DATABASE_URL", "sqlite:///local.db"),
    ("TEST_DATABASE_URL", "x"),
    ("MYSQL_PWD", "x"),
    ("PGPASSWORD", "x"),
    ("db_password", "x"),
    ("LDAP_PASSWD", "x"),
    ("SMBPASSWD", "x"),
    ("GOOGLE_APPLICATION_CREDENTIALS", "/home/me/key.json"),
    ("AZURE_CREDENTIAL_FILE", "x"),
    ("NPM_AUTH_TOKEN", "x"),
    ("NPM_CONFIG__AUTH", "x"),
    ("npm_config__authToken", "x"),
    ("STRIPE_KEY", "x"),
    ("SSH_PRIVATE_KEY", "x"),
    ("MAILGUN_APIKEY", "x"),
    ("CLIENT_SECRET", "x"),
    ("REDIS_HOST_URL", "redis://:hunter2@cache:6379/0"),
    ("PIP_INDEX_URL", "https://me:hunter2@pypi.example/simple"),
    ("UPSTREAM", "see postgres://app:pw@db/app for details"),
]

KEPT = [
    ("PATH", "/usr/local/bin:/usr/bin:/bin"),
    ("HOME", "/home/me"),
    ("LANG", "en_US.UTF-8"),
    ("LC_ALL", "C.UTF-8"),
    ("USER", "me"),
    ("SHELL", "/bin/bash"),
    ("PWD", "/home/me/project"),
    ("OLDPWD", "/home/me"),
    ("TMPDIR", "/tmp"),
    ("EDITOR", "vim"),
    ("VIRTUAL_ENV", "/home/me/.venv"),
    ("SSH_AUTH_SOCK", "/run/user/1000/ssh-agent"),
    ("XAUTHORITY", "/home/me/.Xauthority"),
    ("GIT_AUTHOR_NAME", "Me"),
    ("KEYMAP", "us"),
    ("KUBECONFIG", "/home/me/.kube/config"),
    ("HTTP_PROXY", "http://proxy.example:3128"),
    ("REPO", "https://user@git.example/repo.git"),
    ("SITE", "https://example.org/a:b@c"),
    ("SCHEDULE", "at 10:30@office"),
]


@pytest.mark.parametrize(("name", "value"), SCRUBBED)
def test_the_default_list_scrubs(name: str, value: str) -> None:
    assert DEFAULT.secret(name, value)


@pytest.mark.parametrize(("name", "value"), KEPT)
def test_the_default_list_keeps(name: str, value: str) -> None:
    assert not DEFAULT.secret(name, value)


def test_a_custom_list_with_a_glob_and_no_url_check() -> None:
    custom = Scrub(["internal", "corp_*_id"], urls=False)
    assert custom.secret("MY_INTERNAL_HOST", "x")
    assert custom.secret("CORP_USER_ID", "x")
    assert not custom.secret("CORP_USER_IDS", "x")  # a glob matches the whole name
    assert not custom.secret("GITHUB_TOKEN", "x")  # the list replaces the default one
    assert not custom.secret("DB", "postgres://app:pw@db/app")
