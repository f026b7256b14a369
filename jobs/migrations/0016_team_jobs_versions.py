"""Each team's jobs version, moved forward by PostgreSQL triggers in the same
transaction as any change to its job requests (``jobs.models.versions``).
SQLite (the embedded default) gets the table but no triggers: answers are not
cached there."""

import django.db.models.deletion
from django.db import migrations, models

CREATE = """
CREATE SEQUENCE jobs_version_seq;
CREATE FUNCTION jobs_bump_team_versions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- One upsert per team the statement touched, in team order so that two
    -- writers of several teams take the rows' locks in the same order.
    IF TG_OP = 'INSERT' THEN
        INSERT INTO jobs_teamjobsversion (team_id, version)
        SELECT team_id, nextval('jobs_version_seq')
        FROM (SELECT DISTINCT team_id FROM new_rows ORDER BY team_id) AS touched
        ON CONFLICT (team_id) DO UPDATE SET version = EXCLUDED.version;
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO jobs_teamjobsversion (team_id, version)
        SELECT team_id, nextval('jobs_version_seq')
        FROM (
            SELECT team_id FROM new_rows UNION SELECT team_id FROM old_rows ORDER BY team_id
        ) AS touched
        ON CONFLICT (team_id) DO UPDATE SET version = EXCLUDED.version;
    ELSE
        INSERT INTO jobs_teamjobsversion (team_id, version)
        SELECT team_id, nextval('jobs_version_seq')
        FROM (SELECT DISTINCT team_id FROM old_rows ORDER BY team_id) AS touched
        ON CONFLICT (team_id) DO UPDATE SET version = EXCLUDED.version;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER jobs_versions_insert AFTER INSERT ON jobs_jobrequest
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_bump_team_versions();
CREATE TRIGGER jobs_versions_update AFTER UPDATE ON jobs_jobrequest
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_bump_team_versions();
CREATE TRIGGER jobs_versions_delete AFTER DELETE ON jobs_jobrequest
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION jobs_bump_team_versions();
"""

DROP = """
DROP TRIGGER IF EXISTS jobs_versions_insert ON jobs_jobrequest;
DROP TRIGGER IF EXISTS jobs_versions_update ON jobs_jobrequest;
DROP TRIGGER IF EXISTS jobs_versions_delete ON jobs_jobrequest;
DROP FUNCTION IF EXISTS jobs_bump_team_versions();
DROP SEQUENCE IF EXISTS jobs_version_seq;
"""


def _on_postgresql(sql):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0015_models_moved_to_their_apps"),
        ("queues", "0009_topology"),
    ]

    operations = [
        migrations.CreateModel(
            name="TeamJobsVersion",
            fields=[
                (
                    "team",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        primary_key=True,
                        related_name="jobs_version",
                        serialize=False,
                        to="queues.team",
                    ),
                ),
                ("version", models.BigIntegerField()),
            ],
            options={"db_table": "jobs_teamjobsversion"},
        ),
        migrations.RunPython(_on_postgresql(CREATE), _on_postgresql(DROP)),
    ]
