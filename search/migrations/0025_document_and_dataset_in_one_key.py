"""The chunk, symbol and reference rows reference (document, dataset) as one key (search.models IN_DOCUMENT says why).

The single-column keys are dropped (db_constraint=False in the model state) and one composite key per table is added
NOT VALID, then validated: validating takes only a SHARE UPDATE EXCLUSIVE lock, so writers keep writing while the
existing rows are checked. A row whose dataset is not its document's fails the validation, and the migration with it:
such a row was already wrong.
"""

import django.db.models.deletion
from django.db import migrations, models

TABLES = ("search_chunk", "search_symbol", "search_symbolref")

FORWARD = "".join(
    f"ALTER TABLE {t} ADD CONSTRAINT {t}_in_document FOREIGN KEY (document_id, dataset_id) "
    f"REFERENCES search_document (id, dataset_id) DEFERRABLE INITIALLY DEFERRED NOT VALID;\n"
    f"ALTER TABLE {t} VALIDATE CONSTRAINT {t}_in_document;\n" for t in TABLES)
REVERSE = "".join(f"ALTER TABLE {t} DROP CONSTRAINT IF EXISTS {t}_in_document;\n" for t in TABLES)


class Migration(migrations.Migration):

    dependencies = [
        ('search', '0024_chunk_and_symbol_indexes_without_duplicates'),
    ]

    operations = [
        migrations.AlterField(
            model_name='chunk',
            name='dataset',
            field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='chunks', to='search.dataset'),
        ),
        migrations.AlterField(
            model_name='chunk',
            name='document',
            field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='chunks', to='search.document'),
        ),
        migrations.AlterField(
            model_name='symbol',
            name='dataset',
            field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='search.dataset'),
        ),
        migrations.AlterField(
            model_name='symbol',
            name='document',
            field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='symbols', to='search.document'),
        ),
        migrations.AlterField(
            model_name='symbolref',
            name='dataset',
            field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='search.dataset'),
        ),
        migrations.AlterField(
            model_name='symbolref',
            name='document',
            field=models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='symbol_refs', to='search.document'),
        ),
        migrations.AddConstraint(
            model_name='document',
            constraint=models.UniqueConstraint(fields=('id', 'dataset'), name='uniq_document_id_dataset'),
        ),
        migrations.RunSQL(FORWARD, REVERSE),
    ]
