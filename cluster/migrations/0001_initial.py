"""The models of what the cluster did, moved here from jobs when jobs/ was split.
State only: their tables keep their jobs_ names (db_table) and their data."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('jobs', '0014_observed_nodes'),
        ('queues', '0009_topology'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='ObservedNode',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=253, unique=True)),
                        ('labels', models.JSONField(default=dict)),
                        ('allocatable', models.JSONField(default=dict)),
                        ('changed_at', models.DateTimeField()),
                    ],
                    options={
                        'db_table': 'jobs_observednode',
                        'ordering': ['name'],
                    },
                ),
                migrations.CreateModel(
                    name='SyncCursor',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('kind', models.CharField(max_length=64, unique=True)),
                        ('resource_version', models.CharField(blank=True, max_length=32)),
                        ('listed_at', models.DateTimeField(blank=True, null=True)),
                        ('updated_at', models.DateTimeField(auto_now=True)),
                    ],
                    options={
                        'db_table': 'jobs_synccursor',
                    },
                ),
                migrations.CreateModel(
                    name='SyncStepHealth',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('step', models.CharField(choices=[('workloads', 'Workloads listed'), ('queue_status', 'Queue status mirrored'), ('jobs', 'Jobs followed'), ('snapshots', 'Usage and capacity snapshots'), ('forecasts', 'Start forecasts')], max_length=32, unique=True)),
                        ('last_run_at', models.DateTimeField(blank=True, null=True)),
                        ('last_success_at', models.DateTimeField(blank=True, null=True)),
                        ('last_failure_at', models.DateTimeField(blank=True, null=True)),
                        ('last_error', models.TextField(blank=True)),
                        ('last_duration_seconds', models.FloatField(blank=True, null=True)),
                        ('consecutive_failures', models.PositiveIntegerField(default=0)),
                        ('failures_total', models.PositiveBigIntegerField(default=0)),
                    ],
                    options={
                        'db_table': 'jobs_syncstephealth',
                        'ordering': ['step'],
                    },
                ),
                migrations.CreateModel(
                    name='BorrowingRollup',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('hour', models.DateTimeField()),
                        ('borrower', models.CharField(max_length=253)),
                        ('lender', models.CharField(max_length=253)),
                        ('flavor', models.CharField(max_length=253)),
                        ('gpu_seconds', models.FloatField(default=0.0)),
                    ],
                    options={
                        'db_table': 'jobs_borrowingrollup',
                        'ordering': ['-hour', 'borrower', 'lender'],
                        'indexes': [models.Index(fields=['hour'], name='jobs_borrow_hour_f7f224_idx')],
                        'constraints': [models.UniqueConstraint(fields=('hour', 'borrower', 'lender', 'flavor'), name='unique_borrowing_rollup')],
                    },
                ),
                migrations.CreateModel(
                    name='CapacitySnapshot',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('at', models.DateTimeField(db_index=True)),
                        ('flavor', models.CharField(max_length=253)),
                        ('resource', models.CharField(max_length=317)),
                        ('allocatable', models.BigIntegerField()),
                        ('largest_node', models.BigIntegerField(default=0)),
                        ('nodes', models.PositiveIntegerField()),
                        ('utilised', models.FloatField(blank=True, null=True)),
                        ('utilisation_source', models.CharField(blank=True, max_length=16)),
                        ('allocated', models.BigIntegerField(default=0)),
                    ],
                    options={
                        'db_table': 'jobs_capacitysnapshot',
                        'ordering': ['-at', 'flavor', 'resource'],
                        'constraints': [models.UniqueConstraint(fields=('at', 'flavor', 'resource'), name='unique_capacity_snapshot')],
                    },
                ),
                migrations.CreateModel(
                    name='FairShareRollup',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('hour', models.DateTimeField()),
                        ('cluster_queue', models.CharField(max_length=253)),
                        ('cohort', models.CharField(max_length=253)),
                        ('share_sum', models.FloatField(default=0.0)),
                        ('samples', models.PositiveIntegerField(default=0)),
                    ],
                    options={
                        'db_table': 'jobs_fairsharerollup',
                        'ordering': ['-hour', 'cluster_queue'],
                        'indexes': [models.Index(fields=['cohort', 'hour'], name='jobs_fairsh_cohort_f794b5_idx')],
                        'constraints': [models.UniqueConstraint(fields=('hour', 'cluster_queue'), name='unique_share_rollup')],
                    },
                ),
                migrations.CreateModel(
                    name='PreemptionRollup',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('cluster_queue', models.CharField(max_length=253)),
                        ('hour', models.DateTimeField()),
                        ('reason', models.CharField(max_length=64)),
                        ('preempted', models.BooleanField(default=True, help_text='preempted, not evicted otherwise')),
                        ('count', models.PositiveIntegerField(default=0)),
                        ('gpu_seconds_interrupted', models.FloatField(default=0.0)),
                    ],
                    options={
                        'db_table': 'jobs_preemptionrollup',
                        'ordering': ['-hour', 'cluster_queue', 'reason'],
                        'indexes': [models.Index(fields=['hour'], name='jobs_preemp_hour_1d39a0_idx')],
                        'constraints': [models.UniqueConstraint(fields=('cluster_queue', 'hour', 'reason', 'preempted'), name='unique_preemption_rollup')],
                    },
                ),
                migrations.CreateModel(
                    name='QueueSnapshot',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('at', models.DateTimeField(db_index=True)),
                        ('cluster_queue', models.CharField(max_length=253)),
                        ('flavor', models.CharField(max_length=253)),
                        ('resource', models.CharField(max_length=317)),
                        ('nominal', models.BigIntegerField(default=0)),
                        ('usage', models.BigIntegerField(default=0)),
                        ('borrowed', models.BigIntegerField(default=0)),
                        ('lent', models.BigIntegerField(default=0)),
                        ('pending_workloads', models.PositiveIntegerField(default=0)),
                        ('admitted_workloads', models.PositiveIntegerField(default=0)),
                        ('utilised', models.FloatField(blank=True, null=True)),
                    ],
                    options={
                        'db_table': 'jobs_queuesnapshot',
                        'ordering': ['-at', 'cluster_queue', 'flavor', 'resource'],
                        'indexes': [models.Index(fields=['cluster_queue', '-at'], name='jobs_queues_cluster_905ae4_idx')],
                        'constraints': [models.UniqueConstraint(fields=('at', 'cluster_queue', 'flavor', 'resource'), name='unique_queue_snapshot')],
                    },
                ),
                migrations.CreateModel(
                    name='QueueStatus',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('kind', models.CharField(max_length=16)),
                        ('namespace', models.CharField(blank=True, max_length=63)),
                        ('name', models.CharField(max_length=253)),
                        ('cluster_queue', models.CharField(blank=True, max_length=253)),
                        ('pending_workloads', models.PositiveIntegerField(default=0)),
                        ('reserving_workloads', models.PositiveIntegerField(default=0)),
                        ('admitted_workloads', models.PositiveIntegerField(default=0)),
                        ('status', models.JSONField(default=dict)),
                        ('observed_at', models.DateTimeField()),
                    ],
                    options={
                        'db_table': 'jobs_queuestatus',
                        'ordering': ['kind', 'namespace', 'name'],
                        'constraints': [models.UniqueConstraint(fields=('kind', 'namespace', 'name'), name='unique_queue_status')],
                    },
                ),
                migrations.CreateModel(
                    name='WaitRollup',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('cluster_queue', models.CharField(max_length=253)),
                        ('hour', models.DateTimeField()),
                        ('admissions', models.PositiveIntegerField(default=0)),
                        ('wait_seconds_sum', models.FloatField(default=0.0)),
                        ('gpus_admitted', models.PositiveBigIntegerField(default=0)),
                        ('b00', models.PositiveIntegerField(default=0)),
                        ('b01', models.PositiveIntegerField(default=0)),
                        ('b02', models.PositiveIntegerField(default=0)),
                        ('b03', models.PositiveIntegerField(default=0)),
                        ('b04', models.PositiveIntegerField(default=0)),
                        ('b05', models.PositiveIntegerField(default=0)),
                        ('b06', models.PositiveIntegerField(default=0)),
                        ('b07', models.PositiveIntegerField(default=0)),
                        ('b08', models.PositiveIntegerField(default=0)),
                        ('b09', models.PositiveIntegerField(default=0)),
                        ('b10', models.PositiveIntegerField(default=0)),
                        ('b11', models.PositiveIntegerField(default=0)),
                        ('b12', models.PositiveIntegerField(default=0)),
                    ],
                    options={
                        'db_table': 'jobs_waitrollup',
                        'ordering': ['-hour', 'cluster_queue'],
                        'indexes': [models.Index(fields=['hour', 'cluster_queue'], name='jobs_waitro_hour_a8effa_idx')],
                        'constraints': [models.UniqueConstraint(fields=('cluster_queue', 'hour'), name='unique_wait_rollup')],
                    },
                ),
                migrations.CreateModel(
                    name='WorkloadRecord',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('uid', models.CharField(max_length=64, unique=True)),
                        ('namespace', models.CharField(db_index=True, max_length=63)),
                        ('name', models.CharField(max_length=253)),
                        ('job_kind', models.CharField(blank=True, max_length=64)),
                        ('job_name', models.CharField(blank=True, max_length=253)),
                        ('local_queue', models.CharField(blank=True, max_length=63)),
                        ('cluster_queue', models.CharField(blank=True, db_index=True, max_length=253)),
                        ('priority', models.IntegerField(default=0)),
                        ('priority_class', models.CharField(blank=True, max_length=253)),
                        ('requested', models.JSONField(default=dict)),
                        ('pod_sets', models.JSONField(default=list)),
                        ('flavors', models.JSONField(blank=True, default=dict)),
                        ('admission_checks', models.JSONField(blank=True, default=dict)),
                        ('state', models.CharField(choices=[('pending', 'Pending'), ('quota-reserved', 'Quota reserved (waiting for admission checks)'), ('admitted', 'Admitted'), ('evicted', 'Evicted (its job is stopping)'), ('finished', 'Finished'), ('failed', 'Failed'), ('deactivated', 'Deactivated'), ('deleted', 'Deleted from the cluster')], db_index=True, default='pending', max_length=16)),
                        ('reason', models.CharField(blank=True, max_length=64)),
                        ('message', models.TextField(blank=True)),
                        ('created_at', models.DateTimeField(db_index=True)),
                        ('reserved_at', models.DateTimeField(blank=True, null=True)),
                        ('admitted_at', models.DateTimeField(blank=True, null=True)),
                        ('finished_at', models.DateTimeField(blank=True, null=True)),
                        ('evictions', models.PositiveIntegerField(default=0)),
                        ('resource_version', models.CharField(blank=True, max_length=32)),
                        ('synced_at', models.DateTimeField(auto_now=True)),
                        ('team', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='workloads', to='queues.team')),
                    ],
                    options={
                        'db_table': 'jobs_workloadrecord',
                        'ordering': ['-created_at', '-id'],
                    },
                ),
                migrations.CreateModel(
                    name='WorkloadEvent',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('type', models.CharField(choices=[('created', 'Created'), ('quota-reserved', 'Quota Reserved'), ('check-state', 'Admission check state changed'), ('admitted', 'Admitted'), ('evicted', 'Evicted'), ('preempted', 'Preempted'), ('requeued', 'Requeued'), ('finished', 'Finished'), ('failed', 'Failed'), ('deactivated', 'Deactivated'), ('deleted', 'Deleted')], max_length=16)),
                        ('at', models.DateTimeField(db_index=True)),
                        ('reason', models.CharField(blank=True, max_length=64)),
                        ('message', models.TextField(blank=True)),
                        ('details', models.JSONField(blank=True, default=dict)),
                        ('workload', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='events', to='cluster.workloadrecord')),
                    ],
                    options={
                        'db_table': 'jobs_workloadevent',
                        'ordering': ['at', 'id'],
                    },
                ),
                migrations.CreateModel(
                    name='PendingForecast',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('cluster_queue', models.CharField(db_index=True, max_length=253)),
                        ('position', models.PositiveIntegerField(blank=True, null=True)),
                        ('reason', models.CharField(blank=True, max_length=64)),
                        ('message', models.TextField(blank=True)),
                        ('earliest_start', models.DateTimeField(blank=True, null=True)),
                        ('latest_start', models.DateTimeField(blank=True, null=True)),
                        ('explanation', models.JSONField(default=dict)),
                        ('computed_at', models.DateTimeField()),
                        ('workload', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='forecast', to='cluster.workloadrecord')),
                    ],
                    options={
                        'db_table': 'jobs_pendingforecast',
                        'ordering': ['cluster_queue', 'position'],
                    },
                ),
                migrations.CreateModel(
                    name='TeamUsageSnapshot',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('at', models.DateTimeField(db_index=True)),
                        ('allocated', models.PositiveIntegerField(default=0)),
                        ('utilised', models.FloatField(blank=True, null=True)),
                        ('utilisation_source', models.CharField(blank=True, max_length=16)),
                        ('team', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='usage', to='queues.team')),
                    ],
                    options={
                        'db_table': 'jobs_teamusagesnapshot',
                        'ordering': ['-at', 'team'],
                        'indexes': [models.Index(fields=['team', '-at'], name='jobs_teamus_team_id_e4d612_idx')],
                        'constraints': [models.UniqueConstraint(fields=('at', 'team'), name='unique_team_usage_snapshot')],
                    },
                ),
                migrations.AddIndex(
                    model_name='workloadrecord',
                    index=models.Index(fields=['cluster_queue', 'state'], name='jobs_worklo_cluster_b6c539_idx'),
                ),
                migrations.AddConstraint(
                    model_name='workloadevent',
                    constraint=models.UniqueConstraint(fields=('workload', 'type', 'at', 'reason'), name='unique_workload_event'),
                ),

            ],
            database_operations=[],
        ),
    ]
