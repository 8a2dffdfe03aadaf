"""The code tools' tables: per-document trigrams and symbol digest, definitions, references."""

import django.contrib.postgres.fields
import django.contrib.postgres.indexes
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('projects', '0005_project_fusion'),
        ('search', '0013_quality_job'),
    ]

    operations = [
        migrations.CreateModel(
            name='CodeFile',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('path', models.CharField(max_length=1000)),
                ('lang', models.CharField(blank=True, default='', max_length=40)),
                ('lines', models.PositiveIntegerField(default=0)),
                ('trigrams', django.contrib.postgres.fields.ArrayField(base_field=models.BigIntegerField(), blank=True, default=list, size=None)),
                ('symbols_digest', models.CharField(blank=True, default='', max_length=64)),
                ('dataset', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='projects.dataset')),
                ('document', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='code_file', to='search.document')),
            ],
            options={
                'indexes': [models.Index(fields=['dataset', 'path'], name='codefile_dataset_path'), django.contrib.postgres.indexes.GinIndex(fields=['trigrams'], name='codefile_trigrams')],
            },
        ),
        migrations.CreateModel(
            name='Symbol',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('path', models.CharField(max_length=1000)),
                ('lang', models.CharField(blank=True, default='', max_length=40)),
                ('name', models.CharField(max_length=300)),
                ('qualname', models.CharField(max_length=500)),
                ('kind', models.CharField(max_length=32)),
                ('signature', models.CharField(blank=True, default='', max_length=300)),
                ('start_line', models.PositiveIntegerField()),
                ('end_line', models.PositiveIntegerField()),
                ('dataset', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='projects.dataset')),
                ('document', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='symbols', to='search.document')),
            ],
            options={
                'indexes': [models.Index(fields=['dataset', 'name'], name='symbol_dataset_name'), models.Index(fields=['document', 'start_line'], name='symbol_document_line')],
            },
        ),
        migrations.CreateModel(
            name='SymbolRef',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('path', models.CharField(max_length=1000)),
                ('name', models.CharField(max_length=300)),
                ('kind', models.CharField(max_length=16)),
                ('line', models.PositiveIntegerField()),
                ('qualifier', models.CharField(blank=True, default='', max_length=300)),
                ('container', models.CharField(blank=True, default='', max_length=500)),
                ('alias', models.CharField(blank=True, default='', max_length=300)),
                ('dataset', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='projects.dataset')),
                ('document', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='symbol_refs', to='search.document')),
            ],
            options={
                'indexes': [models.Index(fields=['dataset', 'name'], name='symbolref_dataset_name'), models.Index(fields=['document', 'kind'], name='symbolref_document_kind')],
            },
        ),
    ]
