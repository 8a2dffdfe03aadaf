"""Quality: metrics, evaluation, fusion choice, reranker training, feedback, the dashboard's figures.

See docs/architecture.md for where each job lives and which way imports point."""
