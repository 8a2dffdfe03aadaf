"""The Model Context Protocol server and its HTTP endpoint.

See docs/architecture.md for where each job lives and which way imports point."""
