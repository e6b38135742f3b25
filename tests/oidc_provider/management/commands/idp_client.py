from django.core.management.base import BaseCommand
from oauth2_provider.models import Application


class Command(BaseCommand):
    help = "Register (or update) the confidential client chatsite signs in with."

    def add_arguments(self, parser):
        parser.add_argument("client_id")
        parser.add_argument("client_secret")
        parser.add_argument("redirect_uris", help="space-separated")

    def handle(self, *args, client_id, client_secret, redirect_uris, **options):
        Application.objects.filter(client_id=client_id).delete()
        Application.objects.create(
            name="chatsite",
            client_id=client_id,
            client_secret=client_secret,
            client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
            redirect_uris=redirect_uris,
            algorithm=Application.RS256_ALGORITHM,
            skip_authorization=True,
        )
