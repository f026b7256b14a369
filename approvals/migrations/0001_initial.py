"""The approval models, moved here from jobs when jobs/ was split.
State only: their tables keep their jobs_ names (db_table) and their data."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('jobs', '0014_observed_nodes'),
        ('queues', '0009_topology'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='ApprovalRequest',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('workload_uid', models.CharField(max_length=64)),
                        ('namespace', models.CharField(max_length=63)),
                        ('workload_name', models.CharField(max_length=253)),
                        ('cluster_queue', models.CharField(db_index=True, max_length=253)),
                        ('local_queue', models.CharField(blank=True, max_length=63)),
                        ('attempt', models.PositiveSmallIntegerField(default=1)),
                        ('requested', models.JSONField(default=dict)),
                        ('gpus', models.PositiveIntegerField(default=0)),
                        ('priority', models.IntegerField(default=0)),
                        ('priority_class', models.CharField(blank=True, max_length=253)),
                        ('justification', models.TextField(blank=True)),
                        ('impact', models.JSONField(default=dict)),
                        ('reserved_at', models.DateTimeField(blank=True, null=True)),
                        ('state', models.CharField(choices=[('pending', 'Pending (waiting for an approver)'), ('approved', 'Approved'), ('rejected', 'Rejected'), ('expired', 'Expired (rejected: nobody decided in time)'), ('withdrawn', 'Withdrawn (the workload left before a decision)')], db_index=True, default='pending', max_length=16)),
                        ('created_at', models.DateTimeField(db_index=True)),
                        ('expires_at', models.DateTimeField()),
                        ('decided_at', models.DateTimeField(blank=True, null=True)),
                        ('comment', models.TextField(blank=True)),
                        ('notified_at', models.DateTimeField(blank=True, null=True)),
                        ('applied_at', models.DateTimeField(blank=True, null=True)),
                        ('written', models.BooleanField(default=False)),
                        ('apply_attempts', models.PositiveIntegerField(default=0)),
                        ('decided_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='approval_decisions', to=settings.AUTH_USER_MODEL)),
                        ('job', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='approvals', to='jobs.jobrequest')),
                        ('reapproval_of', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='reapprovals', to='approvals.approvalrequest')),
                        ('requester', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='approval_requests', to=settings.AUTH_USER_MODEL)),
                        ('team', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='approvals', to='queues.team')),
                    ],
                    options={
                        'db_table': 'jobs_approvalrequest',
                        'ordering': ['-created_at', '-id'],
                    },
                ),
                migrations.CreateModel(
                    name='ApprovalEvent',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('action', models.CharField(choices=[('requested', 'Requested'), ('notified', 'Notified'), ('notify-failed', 'Notification failed'), ('approved', 'Approved'), ('rejected', 'Rejected'), ('expired', 'Expired'), ('reapproved', 'Re-approved (back within the grace window)'), ('withdrawn', 'Withdrawn'), ('applied', 'Written to the Workload'), ('apply-failed', 'Writing to the Workload failed (will be retried)')], max_length=16)),
                        ('at', models.DateTimeField(db_index=True)),
                        ('message', models.TextField(blank=True)),
                        ('details', models.JSONField(blank=True, default=dict)),
                        ('actor', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='approval_events', to=settings.AUTH_USER_MODEL)),
                        ('request', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='events', to='approvals.approvalrequest')),
                    ],
                    options={
                        'db_table': 'jobs_approvalevent',
                        'ordering': ['at', 'id'],
                    },
                ),
                migrations.AddIndex(
                    model_name='approvalrequest',
                    index=models.Index(fields=['state', 'expires_at'], name='jobs_approv_state_a26000_idx'),
                ),
                migrations.AddIndex(
                    model_name='approvalrequest',
                    index=models.Index(fields=['workload_uid', '-attempt'], name='jobs_approv_workloa_2f0ae0_idx'),
                ),
                migrations.AddConstraint(
                    model_name='approvalrequest',
                    constraint=models.UniqueConstraint(fields=('workload_uid', 'attempt'), name='unique_approval_attempt'),
                ),
                migrations.AddConstraint(
                    model_name='approvalrequest',
                    constraint=models.UniqueConstraint(condition=models.Q(('state', 'pending')), fields=('workload_uid',), name='unique_pending_approval'),
                ),

            ],
            database_operations=[],
        ),
    ]
