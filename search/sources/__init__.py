"""Dataset sources the platform follows: git repositories (gitsync) and web sites (crawler).

spec checks what a source may say, netguard refuses private and metadata addresses, secrets keeps tokens
encrypted, sync sets sources and runs/schedules their syncs as ingest jobs.
"""
