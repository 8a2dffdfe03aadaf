"""Server-rendered pages of context search, content and sources.

See docs/architecture.md for where each job lives and which way imports point."""
