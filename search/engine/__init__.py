"""The retrieval engine: index adapters, encoders, the query pipeline and its stages.

See docs/architecture.md for where each job lives and which way imports point."""
