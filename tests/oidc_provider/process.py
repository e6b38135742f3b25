"""The test OpenID provider as a server process, and the fixtures that start it.

``identity_provider`` (session): an ``IdentityProvider`` on a free loopback port, its state
in a temporary folder: an SQLite database migrated at start, and an RSA key generated here.
``.issuer`` is what chatsite's ``OIDC_ISSUER`` names; ``.user(...)`` creates or changes a
user and their groups; ``.register_client(...)``; ``.fault("wrong_audience" | "expired")``
makes the ID tokens it issues from then on wrong that way, ``.fault("")`` right again.

``sso_site`` (function): a chatsite daphne of its own with single sign-on switched on against
that provider, its client registered there; ``sso_site(**env)`` starts it with more settings.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.processes import BASE_DIR, GUARDED_PYTHON, DaphneProcess, _started

SETTINGS = "tests.oidc_provider.settings"
CLIENT_ID = "chatsite-test-client"
CLIENT_SECRET = "chatsite-test-secret"


class IdentityProvider(DaphneProcess):
    """A daphne like chatsite's (the port it logs, the same readiness), serving the provider."""

    name = "identity-provider"

    def __init__(self, env: dict[str, str], state_dir: Path) -> None:
        super().__init__(env)
        self.state_dir = state_dir

    def command(self) -> list[str]:
        return [*GUARDED_PYTHON, "daphne", "-b", "127.0.0.1", "-p", "0",
                "tests.oidc_provider.asgi:application"]  # fmt: skip

    @property
    def issuer(self) -> str:
        return f"{self.url}/o"

    def manage(self, *args: str) -> None:
        """A management command of the provider's project, on its database."""
        subprocess.run(
            [*GUARDED_PYTHON, "django", *args],
            cwd=BASE_DIR,
            env=self.env,
            check=True,
            capture_output=True,
            timeout=60,
        )

    def user(self, username: str, password: str, *, email: str = "", groups: tuple = ()) -> None:
        self.manage(
            "idp_user", username, "--password", password, "--email", email,
            "--groups", ",".join(groups),
        )  # fmt: skip

    def register_client(self, redirect_uri: str) -> None:
        self.manage("idp_client", CLIENT_ID, CLIENT_SECRET, redirect_uri)

    def fault(self, name: str) -> None:
        (self.state_dir / "fault").write_text(name)


def _signing_key() -> bytes:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


@pytest.fixture(scope="session")
def identity_provider() -> Iterator[IdentityProvider]:
    state_dir = Path(tempfile.mkdtemp(prefix="chatsite-idp-"))
    (state_dir / "signing-key.pem").write_bytes(_signing_key())
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": SETTINGS,
        "IDP_DIR": str(state_dir),
        "PYTHONUNBUFFERED": "1",
    }
    provider = IdentityProvider(env, state_dir)
    provider.manage("migrate", "--noinput")
    try:
        yield from _started(provider)
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)


@pytest.fixture
def identity_provider_clean(identity_provider) -> Iterator[IdentityProvider]:
    """The session's provider, with no fault left by an earlier test."""
    identity_provider.fault("")
    identity_provider.print_new_log()
    yield identity_provider
    identity_provider.fault("")
    identity_provider.print_new_log()


@pytest.fixture
def sso_site(identity_provider_clean, spawn_daphne):
    """``sso_site(**env)``: a chatsite daphne with single sign-on on, its client registered."""

    def start(**env: str) -> Any:
        daphne = spawn_daphne(
            OIDC_ISSUER=identity_provider_clean.issuer,
            OIDC_CLIENT_ID=CLIENT_ID,
            OIDC_CLIENT_SECRET=CLIENT_SECRET,
            OIDC_PROVIDER_NAME="Test IdP",
            **env,
        )
        identity_provider_clean.register_client(f"{daphne.url}/accounts/sso/callback/")
        return daphne

    return start
