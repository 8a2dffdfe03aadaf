"""Wake the index applier when outbox rows commit, and record how far its last complete pass read.

Why NOTIFY: the process that owns the embedded store applies the outbox in a
background thread (search.engine.applier) instead of on the query path. A
statement-level trigger sends one notification per INSERT statement on
search_indexoutbox, which Postgres delivers only when the writing transaction
commits (and drops if it rolls back), so the applier wakes exactly when there
is something to read. The applier also polls, so a lost notification only
delays, never loses, an update.

Why scanned_id/scanned_at: a young gap in outbox ids holds the watermark back
(a transaction may still commit into it), but the rows after the gap are
already applied; `wait_until_indexed` uses the last complete pass instead of
waiting out the gap's grace period.
"""
from django.db import migrations, models

CHANNEL = "search_index_outbox"

FORWARD = rf"""
CREATE OR REPLACE FUNCTION search_indexoutbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM pg_notify('{CHANNEL}', '');
    RETURN NULL;
END
$fn$;

CREATE TRIGGER search_indexoutbox_notify
AFTER INSERT ON search_indexoutbox
FOR EACH STATEMENT
EXECUTE FUNCTION search_indexoutbox_notify();
"""

REVERSE = r"""
DROP TRIGGER IF EXISTS search_indexoutbox_notify ON search_indexoutbox;
DROP FUNCTION IF EXISTS search_indexoutbox_notify();
"""


class Migration(migrations.Migration):

    dependencies = [
        ("search", "0005_chunk_path_like"),
    ]

    operations = [
        migrations.AddField(model_name="indexwatermark", name="scanned_id",
                            field=models.BigIntegerField(default=0)),
        migrations.AddField(model_name="indexwatermark", name="scanned_at",
                            field=models.DateTimeField(blank=True, null=True)),
        migrations.RunSQL(FORWARD, reverse_sql=REVERSE),
    ]
