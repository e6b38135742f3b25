"""The provider's claims: the user's username, email and groups (the ``groups`` scope), and
the faults the tests ask for, read from ``IDP_DIR/fault`` at each token."""

from datetime import timedelta

from django.conf import settings
from django.utils import timezone
from oauth2_provider.oauth2_validators import OAuth2Validator

FAULTS = ("wrong_audience", "expired")


def current_fault() -> str:
    path = settings.IDP_DIR / "fault"
    return path.read_text().strip() if path.exists() else ""


class GroupsValidator(OAuth2Validator):
    oidc_claim_scope = {**OAuth2Validator.oidc_claim_scope, "groups": "groups"}

    def get_additional_claims(self, request):
        user = request.user
        return {
            "preferred_username": user.username,
            "email": user.email,
            "groups": sorted(user.groups.values_list("name", flat=True)),
        }

    def get_id_token_dictionary(self, token, token_handler, request):
        claims, expiration_time = super().get_id_token_dictionary(token, token_handler, request)
        fault = current_fault()
        if fault == "wrong_audience":
            claims["aud"] = "another-application"
        elif fault == "expired":
            an_hour_ago = timezone.now() - timedelta(hours=1)
            claims["iat"] = int(an_hour_ago.timestamp())
            claims["exp"] = int((an_hour_ago + timedelta(minutes=5)).timestamp())
        return claims, expiration_time
