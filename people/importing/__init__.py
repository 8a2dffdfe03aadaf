"""Loading a directory: JSONL and CSV imports with their job rows (importer) and the generated demo (demo)."""
