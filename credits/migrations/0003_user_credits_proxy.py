# A proxy of the user for the staff console's balances and grant action (credits/admin.py): no table.

import accounts.models
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('accounts', '0004_user_account_limits'),
        ('credits', '0002_idempotency_lease'),
    ]

    operations = [
        migrations.CreateModel(
            name='UserCredits',
            fields=[
            ],
            options={
                'verbose_name': "user's credits",
                'verbose_name_plural': "users' credits",
                'proxy': True,
                'indexes': [],
                'constraints': [],
            },
            bases=('accounts.user',),
            managers=[
                ('objects', accounts.models.UserManager()),
            ],
        ),
    ]
