"""Understanding a query: the deterministic parser and its LLM path (parser), the curated word lists (curated), the
directory's own vocabulary (vocabulary) and the gazetteer built from both, semantic role words (semantic), and the
checks that turn a parse into constraints (normalize). Reads the models, never the retrieval above it."""
