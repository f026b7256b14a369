from __future__ import annotations

from django.urls import path

from frontend import vendor
from frontend.views import (
    approvals,
    cohorts,
    gang_fit,
    grants,
    jobs,
    kueue_configuration,
    kueue_import,
    overview,
    policy,
    profile,
    queues,
    showback,
    teams,
    whatif,
    workloads,
)

urlpatterns = [
    path("", overview.overview, name="home"),
    path("queues/", queues.queue_list, name="queues"),
    path("queues/<str:name>/", queues.queue_detail, name="queue"),
    path("team/", teams.my_team, name="my-team"),
    path("teams/", teams.team_list, name="teams"),
    path("profile/", profile.profile, name="profile"),
    path("teams/<str:slug>/", teams.team_page, name="team"),
    path("cohorts/", cohorts.cohort_page, name="cohorts"),
    path("jobs/", jobs.job_list, name="jobs"),
    path("jobs/<int:job_id>/", jobs.job_detail, name="job"),
    path("workloads/", workloads.workload_list, name="workloads"),
    path("usage/", showback.usage_page, name="usage"),
    path("gang-fit/", gang_fit.gang_fit_page, name="gang-fit"),
    path("approvals/", approvals.inbox, name="approvals"),
    path("approvals/history/", approvals.history, name="approvals-history"),
    path("approvals/history.csv", approvals.history_csv, name="approvals-history-csv"),
    path("approvals/<int:approval_id>/", approvals.detail, name="approval"),
    path("grants/", grants.grant_list, name="grants"),
    path("grants/new/", grants.grant_new, name="grant-new"),
    path("grants/<int:grant_id>/", grants.grant_detail, name="grant"),
    path("policy/", policy.policy_index, name="policy"),
    path(
        "policy/kueue-configuration/",
        kueue_configuration.kueue_configuration,
        name="kueue-configuration-editor",
    ),
    path("policy/import/", kueue_import.kueue_import, name="kueue-import"),
    path("policy/new/<str:kind>/", policy.policy_new, name="policy-new"),
    path("policy/<str:kind>/<str:name>/", policy.policy_edit, name="policy-edit"),
    path("whatif/", whatif.whatif_page, name="whatif"),
    path("whatif/<int:run_id>/", whatif.whatif_run, name="whatif-run"),
    path("vendor/plotly-<str:version>.min.js", vendor.plotly_js, name="plotly-js"),
]
