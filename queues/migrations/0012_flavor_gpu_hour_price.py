from django.db import migrations, models


class Migration(migrations.Migration):
    """A price per GPU-hour on each ResourceFlavor (showback); existing flavors
    start unpriced (null), not free."""

    dependencies = [
        ("queues", "0011_adopted_objects"),
    ]

    operations = [
        migrations.AddField(
            model_name="resourceflavor",
            name="gpu_hour_price",
            field=models.DecimalField(blank=True, decimal_places=4, max_digits=11, null=True),
        ),
    ]
