"""Web sources: a polite, scoped crawl (spec: what it may say; crawler, fetcher, links, urls: the crawl)."""
from search.sources.base import SourceType
from search.sources.web import spec
from search.sources.web.crawler import crawl_site

SOURCE = SourceType(name="web", kinds=("web",),
                    fields=frozenset({"seeds", "scope", "max_pages", "max_depth", "include", "exclude"}),
                    parse=spec.parse, display=lambda config: config["seeds"][0], sync=crawl_site)
