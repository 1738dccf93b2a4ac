"""Webhook signing secrets are stored encrypted (``orgs.secret_box``), no longer in plaintext:
existing ones are encrypted in place, then the plaintext column is dropped."""

from django.db import migrations, models


def encrypt_existing(apps, schema_editor):
    from orgs.secret_box import secret_encrypt  # local: the running code's key, not a historical model

    endpoints = apps.get_model("orgs", "WebhookEndpoint")
    for endpoint in endpoints.objects.all().only("pk", "secret"):
        endpoints.objects.filter(pk=endpoint.pk).update(secret_encrypted=secret_encrypt(endpoint.secret))


def decrypt_existing(apps, schema_editor):
    from orgs.secret_box import secret_decrypt  # local: as above

    endpoints = apps.get_model("orgs", "WebhookEndpoint")
    for endpoint in endpoints.objects.all().only("pk", "secret_encrypted"):
        endpoints.objects.filter(pk=endpoint.pk).update(secret=secret_decrypt(endpoint.secret_encrypted))


class Migration(migrations.Migration):
    dependencies = [("orgs", "0005_accounts_notifications")]

    operations = [
        migrations.AddField("webhookendpoint", "secret_encrypted",
                            models.BinaryField(editable=False, default=b"")),
        migrations.RunPython(encrypt_existing, decrypt_existing),
        migrations.RemoveField("webhookendpoint", "secret"),
        migrations.AlterField("webhookendpoint", "secret_encrypted", models.BinaryField(editable=False)),
    ]
