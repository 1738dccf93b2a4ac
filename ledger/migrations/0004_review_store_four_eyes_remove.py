"""Four-eyes moves from the store (a flag the analyst creating the store chose) to the
organization (``orgs.Organization.four_eyes``, set by an org admin, default on).

No data is copied: a store's ``four_eyes = False`` was never an admin's decision, so it may
not weaken its organization's policy, which stays as it is (on unless an admin turned it off).
"""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('ledger', '0003_logleaf_memory_index'),
        ('orgs', '0002_policy_activity'),
    ]

    operations = [
        migrations.RemoveField(model_name='store', name='four_eyes'),
    ]
