"""Readers by format: bytes in, a text layer out (docs/architecture.md, "Formats").

Why a package of its own: the choice of reader is made once, from the bytes (search.ingest.formats.registry),
and every entry point (folders, uploads, archives, pushes, git, crawls) asks the same registry.
"""
