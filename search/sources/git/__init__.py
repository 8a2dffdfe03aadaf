"""Git sources: a repository followed by diff syncs (spec: what it may say; sync: fetch and ingest what changed)."""
from search.sources.base import SourceType
from search.sources.git import spec
from search.sources.git.sync import sync_git

SOURCE = SourceType(name="git", kinds=("code", "web"), fields=frozenset({"url", "ref", "subdir"}), parse=spec.parse,
                    display=lambda config: config["url"], sync=sync_git)
