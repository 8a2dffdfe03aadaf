"""REST views (DRF) of context search, content, rules and sources.

See docs/architecture.md for where each job lives and which way imports point."""
