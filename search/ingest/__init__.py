"""Sources -> documents -> chunks. Each chunker returns DocumentDraft/ChunkDraft; runner.py persists them."""
