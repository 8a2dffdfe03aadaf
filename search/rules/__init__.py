"""The rules lawyer: rules search, traversal configs and policies, the chunk graph, answers.

See docs/architecture.md for where each job lives and which way imports point."""
