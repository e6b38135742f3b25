"""Single sign-on's parts that need no provider: users and groups from claims
(agents/services/accounts.py), the views switched off or refusing, the password switch, the
system checks, and the socket's session check on a session the provider's backend made.
The sign-ins through a real provider: tests/integration/test_sso.py, tests/e2e/test_sso.py."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse

from agents.models import ProviderIdentity
from agents.services.accounts import (
    user_create_from_claims,
    user_groups_sync,
    user_update_from_claims,
    username_from_claim,
)
from agents.session_check import session_signs_in
from agents.sso import check_configuration
from tests.test_session_check import answer, sign_in

pytestmark = pytest.mark.django_db

ISSUER = "http://127.0.0.1:9/o"
BACKEND = "agents.sso.OpenIDBackend"


@pytest.fixture
def sso_on(settings):
    settings.OIDC_ISSUER = ISSUER
    settings.OIDC_RP_CLIENT_ID = "client"
    settings.OIDC_RP_CLIENT_SECRET = "secret"
    settings.OIDC_ENABLED = True
    settings.OIDC_PROVIDER_NAME = "Acme ID"
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, BACKEND]
    settings.SECURE_SSL_REDIRECT = False
    return settings


def names(user: User) -> set[str]:
    return set(user.groups.values_list("name", flat=True))


# --------------------------------------------------------------------------------------
# Users and groups from claims
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("claim", "username"),
    [
        ("ada", "ada"),
        ("ada.lovelace@example.test", "ada.lovelace@example.test"),
        ("Ada Lovelace", "Ada-Lovelace"),
        ("../../etc/passwd", "etc-passwd"),
        ("<script>", "script"),
        ("张伟", "张伟"),
        ("x" * 400, "x" * 142),
    ],
)
def test_a_username_from_a_claim_is_one_django_accepts(claim, username):
    made = username_from_claim(claim)
    assert made == username
    User(username=made).clean_fields(exclude=["password"])


@pytest.mark.parametrize("claim", [None, "", "   ", "///", 42, ["ada"]])
def test_a_claim_with_no_usable_username_is_refused(claim):
    with pytest.raises(ValidationError, match="no usable username"):
        username_from_claim(claim)


def test_a_new_user_gets_a_free_name_no_password_and_the_providers_identity(settings):
    User.objects.create_user("ada", password="local-1")
    user = user_create_from_claims(
        issuer=ISSUER, claims={"sub": "17", "preferred_username": "ADA", "email": "a@x.test"}
    )
    assert user.username == "ADA-2"
    assert user.email == "a@x.test"
    assert not user.has_usable_password()
    identity = ProviderIdentity.objects.get(user=user)
    assert (identity.issuer, identity.subject) == (ISSUER, "17")


def test_a_claim_without_a_subject_creates_nobody():
    with pytest.raises(ValidationError, match="no subject"):
        user_create_from_claims(issuer=ISSUER, claims={"preferred_username": "ada"})
    assert not User.objects.exists()


def test_every_group_follows_the_claim_when_none_is_named_managed(settings, user):
    settings.OIDC_MANAGED_GROUPS = []
    _research, finance, _ = (Group.objects.create(name=n) for n in ("research", "finance", "ops"))
    user.groups.add(finance)
    user_update_from_claims(user=user, claims={"groups": ["research", "nowhere"]})
    assert names(user) == {"research"}
    assert not Group.objects.filter(name="nowhere").exists()


def test_only_managed_groups_follow_the_claim(settings, user):
    settings.OIDC_MANAGED_GROUPS = ["research", "finance"]
    for name in ("research", "finance", "granted-here"):
        Group.objects.create(name=name)
    user.groups.add(*Group.objects.filter(name__in=["finance", "granted-here"]))
    user_groups_sync(user=user, names={"research", "granted-here-too"})
    assert names(user) == {"research", "granted-here"}


def test_unknown_groups_are_created_only_when_asked(settings, user):
    settings.OIDC_CREATE_GROUPS = True
    user_groups_sync(user=user, names={"new-team"})
    assert names(user) == {"new-team"}


def test_a_missing_groups_claim_means_no_groups_and_a_malformed_one_is_refused(user):
    user.groups.add(Group.objects.create(name="research"))
    with pytest.raises(ValidationError, match="not a list"):
        user_update_from_claims(user=user, claims={"groups": {"research": True}})
    assert names(user) == {"research"}
    user_update_from_claims(user=user, claims={})
    assert names(user) == set()


def test_staff_follows_the_staff_group_and_only_when_one_is_configured(settings, user):
    settings.OIDC_STAFF_GROUP = ""
    user.is_staff = True
    user.save()
    user_update_from_claims(user=user, claims={"groups": []})
    assert User.objects.get(pk=user.pk).is_staff
    settings.OIDC_STAFF_GROUP = "chat-admins"
    user_update_from_claims(user=user, claims={"groups": []})
    assert not User.objects.get(pk=user.pk).is_staff
    user_update_from_claims(user=user, claims={"groups": ["chat-admins"]})
    assert User.objects.get(pk=user.pk).is_staff


# --------------------------------------------------------------------------------------
# The views
# --------------------------------------------------------------------------------------


def test_unconfigured_single_sign_on_has_no_button_and_its_urls_answer_404(settings):
    settings.SECURE_SSL_REDIRECT = False
    client = Client()
    page = client.get(reverse("login")).content.decode()
    assert "Sign in with" not in page
    assert 'name="password"' in page
    assert client.get(reverse("oidc_authentication_init")).status_code == 404
    assert client.get(reverse("oidc_authentication_callback")).status_code == 404


def test_the_sign_in_page_offers_the_providers_button_beside_the_form(sso_on):
    page = Client().get(reverse("login") + "?next=/c/new/").content.decode()
    assert "Sign in with Acme ID" in page
    assert f'href="{reverse("oidc_authentication_init")}?next=/c/new/"' in page
    assert 'name="password"' in page


def test_the_button_and_a_refusal_are_in_chinese_for_a_chinese_browser(sso_on):
    client = Client(headers={"accept-language": "zh-CN"})
    assert "使用 Acme ID 登录" in client.get(reverse("login")).content.decode()
    sso_on.OIDC_PROVIDER_NAME = ""
    assert "使用单点登录" in client.get(reverse("login")).content.decode()
    refused = client.get(reverse("oidc_authentication_callback"), {"code": "c"}, follow=True)
    assert "单点登录失败：此应答不属于在本浏览器中发起的登录" in refused.content.decode()


def test_an_answer_for_a_sign_in_this_browser_did_not_start_is_refused(sso_on):
    client = Client()
    response = client.get(
        reverse("oidc_authentication_callback"), {"code": "c", "state": "forged"}, follow=True
    )
    assert response.redirect_chain == [(reverse("login"), 302)]
    assert "does not belong to a sign-in started in this browser" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_a_provider_that_answers_with_an_error_is_named(sso_on):
    response = Client().get(
        reverse("oidc_authentication_callback"),
        {"error": "access_denied", "state": "s"},
        follow=True,
    )
    assert "the identity provider answered “access_denied”." in response.content.decode()
    response = Client().get(
        reverse("oidc_authentication_callback"),
        {"error": "Call +1 555 0100 to restore your account"},
        follow=True,
    )
    assert "the identity provider answered “?”." in response.content.decode()
    assert "555" not in response.content.decode()


def test_a_provider_out_of_reach_is_named_and_asked_again_next_time(sso_on):
    from agents import sso

    # Port 9 on loopback: nothing listens, the connection is refused at once.
    for _attempt in range(2):
        response = Client().get(reverse("oidc_authentication_init"), follow=True)
        assert response.redirect_chain == [(reverse("login"), 302)]
        assert "failed: the identity provider could not be reached." in response.content.decode()
    assert ISSUER not in sso._discovered


@pytest.fixture
def passwords_off(sso_on):
    sso_on.SIGNIN_PASSWORD_ENABLED = False
    sso_on.AUTHENTICATION_BACKENDS = [
        path for path in sso_on.AUTHENTICATION_BACKENDS if not path.endswith("ModelBackend")
    ]
    sso_on.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    sso_on.CHAT_SIGNUP_ENABLED = True
    return sso_on


def test_with_password_sign_in_off_the_form_is_gone_and_its_posts_refused(passwords_off, user):
    client = Client()
    page = client.get(reverse("login")).content.decode()
    assert "Sign in with Acme ID" in page
    assert 'name="password"' not in page
    assert reverse("signup") not in page
    credentials = {"username": "alice", "password": "pw-for-tests-1"}
    refused = client.post(reverse("login"), credentials)
    assert refused.status_code == 403
    assert "switched off" in refused.content.decode()
    assert client.post("/admin/login/", credentials).status_code == 403
    assert client.post(reverse("password_reset"), {"email": "a@x.test"}).status_code == 403
    assert client.get(reverse("signup")).status_code == 404
    assert "_auth_user_id" not in client.session
    # Not even a form that reaches authenticate() itself finds a password backend.
    from django.contrib.auth import authenticate
    from django.test import RequestFactory

    assert authenticate(RequestFactory().post("/"), **credentials) is None


def test_with_password_sign_in_off_a_signed_in_user_cannot_change_a_password(passwords_off, user):
    client = Client()
    client.force_login(user, backend=BACKEND)
    response = client.post(reverse("password_change"), {"old_password": "pw-for-tests-1"})
    assert response.status_code == 403


def test_a_user_of_the_provider_is_not_offered_a_password_change(sso_on):
    user = user_create_from_claims(issuer=ISSUER, claims={"sub": "5", "preferred_username": "jo"})
    client = Client()
    client.force_login(user, backend=BACKEND)
    html = client.get(reverse("chat")).content.decode()
    assert 'id="sign-out"' in html
    assert 'id="change-password"' not in html


# --------------------------------------------------------------------------------------
# manage.py check
# --------------------------------------------------------------------------------------


def test_check_is_silent_when_single_sign_on_is_off_or_fully_configured(settings, sso_on):
    assert check_configuration() == []
    sso_on.OIDC_ISSUER = sso_on.OIDC_RP_CLIENT_ID = sso_on.OIDC_RP_CLIENT_SECRET = ""
    sso_on.OIDC_ENABLED = False
    assert check_configuration() == []


def test_check_names_what_a_half_configuration_lacks_and_a_site_nobody_can_sign_in_to(settings):
    settings.OIDC_ISSUER, settings.OIDC_RP_CLIENT_ID, settings.OIDC_RP_CLIENT_SECRET = (
        ISSUER, "", "secret"
    )  # fmt: skip
    settings.OIDC_ENABLED = False
    settings.SIGNIN_PASSWORD_ENABLED = False
    problems = {problem.id: problem.msg for problem in check_configuration()}
    assert "OIDC_CLIENT_ID not set" in problems["agents.E301"]
    assert "nobody can sign in" in problems["agents.E302"]


# --------------------------------------------------------------------------------------
# The sockets' session check
# --------------------------------------------------------------------------------------


def test_the_session_check_decides_a_provider_session_itself_and_ends_it_with_the_user(
    sso_on, user
):
    _client, session_key = sign_in(user, backend=BACKEND)
    assert answer(session_key, user.pk) is True  # in one statement, as get_user decides
    user.is_active = False
    user.save()
    assert answer(session_key, user.pk) is False
    sso_on.AUTHENTICATION_BACKENDS = [p for p in sso_on.AUTHENTICATION_BACKENDS if p != BACKEND]
    user.is_active = True
    user.save()
    assert session_signs_in(session_key=session_key, user_id=user.pk) is False


def test_staff_see_which_provider_account_a_user_signs_in_as_and_cannot_edit_it(make_user):
    staff = make_user("root", is_staff=True, is_superuser=True)
    user_create_from_claims(issuer=ISSUER, claims={"sub": "subject-77", "preferred_username": "jo"})
    client = Client()
    client.force_login(staff)
    listing = client.get(reverse("admin:agents_provideridentity_changelist"))
    assert listing.status_code == 200
    assert "subject-77" in listing.content.decode()
    assert client.get(reverse("admin:agents_provideridentity_add")).status_code == 403
