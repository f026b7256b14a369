"""Hands the models that moved to cluster, approvals and whatif over to those
apps, and points JobRequest.workload at cluster.WorkloadRecord. State only:
no table is dropped, renamed or altered."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('approvals', '0001_initial'),
        ('whatif', '0001_initial'),
        ('cluster', '0001_initial'),
        ('jobs', '0014_observed_nodes'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveField(
                    model_name='approvalevent',
                    name='actor',
                ),
                migrations.RemoveField(
                    model_name='approvalevent',
                    name='request',
                ),
                migrations.RemoveField(
                    model_name='approvalrequest',
                    name='decided_by',
                ),
                migrations.RemoveField(
                    model_name='approvalrequest',
                    name='job',
                ),
                migrations.RemoveField(
                    model_name='approvalrequest',
                    name='reapproval_of',
                ),
                migrations.RemoveField(
                    model_name='approvalrequest',
                    name='requester',
                ),
                migrations.RemoveField(
                    model_name='approvalrequest',
                    name='team',
                ),
                migrations.DeleteModel(
                    name='BorrowingRollup',
                ),
                migrations.DeleteModel(
                    name='CapacitySnapshot',
                ),
                migrations.DeleteModel(
                    name='FairShareRollup',
                ),
                migrations.DeleteModel(
                    name='ObservedNode',
                ),
                migrations.RemoveField(
                    model_name='pendingforecast',
                    name='workload',
                ),
                migrations.DeleteModel(
                    name='PreemptionRollup',
                ),
                migrations.DeleteModel(
                    name='QueueSnapshot',
                ),
                migrations.DeleteModel(
                    name='QueueStatus',
                ),
                migrations.DeleteModel(
                    name='SyncCursor',
                ),
                migrations.DeleteModel(
                    name='SyncStepHealth',
                ),
                migrations.RemoveField(
                    model_name='teamusagesnapshot',
                    name='team',
                ),
                migrations.DeleteModel(
                    name='WaitRollup',
                ),
                migrations.RemoveField(
                    model_name='whatifrun',
                    name='created_by',
                ),
                migrations.RemoveField(
                    model_name='workloadevent',
                    name='workload',
                ),
                migrations.RemoveField(
                    model_name='workloadrecord',
                    name='team',
                ),
                migrations.AlterField(
                    model_name='jobrequest',
                    name='workload',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='jobs', to='cluster.workloadrecord'),
                ),
                migrations.DeleteModel(
                    name='ApprovalEvent',
                ),
                migrations.DeleteModel(
                    name='ApprovalRequest',
                ),
                migrations.DeleteModel(
                    name='PendingForecast',
                ),
                migrations.DeleteModel(
                    name='TeamUsageSnapshot',
                ),
                migrations.DeleteModel(
                    name='WhatIfRun',
                ),
                migrations.DeleteModel(
                    name='WorkloadEvent',
                ),
                migrations.DeleteModel(
                    name='WorkloadRecord',
                ),

            ],
            database_operations=[],
        ),
    ]
