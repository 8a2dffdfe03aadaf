"""Machinery every product runs on and no product owns: the encoders (and the device policy that places them) and the
LLM client. It sits below the apps (config <- inference <- accounts ...), so search and people both use it while
people never needs search; it imports only config (docs/architecture.md)."""
