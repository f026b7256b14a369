"""The what-if model, moved here from jobs when jobs/ was split.
State only: its table keeps its jobs_ name (db_table) and its data."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('jobs', '0014_observed_nodes'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='WhatIfRun',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('created_at', models.DateTimeField(db_index=True, default=django.utils.timezone.now)),
                        ('state', models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('succeeded', 'Succeeded'), ('failed', 'Failed')], db_index=True, default='queued', max_length=16)),
                        ('source', models.CharField(choices=[('window', 'Recorded workloads in a window'), ('scenario', 'A scenario file')], max_length=16)),
                        ('window_start', models.DateTimeField(blank=True, null=True)),
                        ('window_end', models.DateTimeField(blank=True, null=True)),
                        ('scenario', models.TextField(blank=True)),
                        ('baseline', models.JSONField(blank=True, default=dict)),
                        ('policy_version', models.BigIntegerField(blank=True, null=True)),
                        ('changes', models.JSONField(blank=True, default=list)),
                        ('workloads', models.PositiveIntegerField(default=0, help_text='in the replayed stream')),
                        ('progress', models.PositiveSmallIntegerField(default=0, help_text='percent, 0-100')),
                        ('heartbeat_at', models.DateTimeField(blank=True, help_text='last progress written', null=True)),
                        ('result', models.JSONField(blank=True, default=dict)),
                        ('error', models.TextField(blank=True)),
                        ('started_at', models.DateTimeField(blank=True, null=True)),
                        ('finished_at', models.DateTimeField(blank=True, null=True)),
                        ('created_by', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='whatif_runs', to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        'db_table': 'jobs_whatifrun',
                        'ordering': ['-created_at', '-id'],
                    },
                ),

            ],
            database_operations=[],
        ),
    ]
