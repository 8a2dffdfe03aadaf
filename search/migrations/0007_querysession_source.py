"""Where each logged query came from: the API, the search pages, or the MCP server."""
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("search", "0006_outbox_notify_watermark_scan"),
    ]

    operations = [
        migrations.AddField(
            model_name="querysession",
            name="source",
            field=models.CharField(choices=[("api", "API"), ("page", "search page"), ("mcp", "MCP server")],
                                   db_index=True, default="api", max_length=8),
        ),
    ]
