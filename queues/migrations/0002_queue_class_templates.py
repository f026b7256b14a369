from django.db import migrations


def install_templates(apps, schema_editor):
    from queues.queue_class_templates import QUEUE_CLASS_TEMPLATES

    QueueClass = apps.get_model("queues", "QueueClass")
    PolicyChange = apps.get_model("queues", "PolicyChange")
    for template in QUEUE_CLASS_TEMPLATES:
        _, created = QueueClass.objects.get_or_create(name=template["name"], defaults=template)
        if created:
            PolicyChange.objects.create(
                actor_username="system",
                kind="queue-class",
                object_name=template["name"],
                action="created",
                before=None,
                after={**template, "default_priority_class": None},
            )


class Migration(migrations.Migration):
    dependencies = [("queues", "0001_initial")]

    operations = [migrations.RunPython(install_templates, migrations.RunPython.noop)]
