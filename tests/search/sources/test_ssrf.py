"""Server-side request forgery: a source may not make the platform fetch from loopback, private, link-local or
metadata addresses, whether it names them, names a host that resolves to them, or gets there by a redirect;
refused when the source is set (search.sources.spec.parse_source) and again at crawl time."""
from __future__ import annotations

import socket

import pytest

from config.errors import api_exception_handler
from search.sources import netguard
from search.sources.spec import parse_source
from tests.search.sources.site_server import LocalSite, html_page

UNSAFE_HOSTS = ["127.0.0.1", "10.0.0.1", "169.254.169.254", "localhost"]  # localhost: /etc/hosts says 127.0.0.1


@pytest.fixture
def default_networks(settings):
    settings.SOURCES_ALLOWED_NETWORKS = []
    return settings


@pytest.mark.parametrize("host", UNSAFE_HOSTS)
def test_a_web_source_naming_an_internal_address_is_refused_with_a_clear_400(default_networks, host):
    with pytest.raises(netguard.UnsafeAddress) as err:
        parse_source({"type": "web", "seeds": ["https://93.184.216.34/", f"http://{host}:8080/docs/"]}, user=None,
                     dataset_kind="web")
    response = api_exception_handler(err.value, {})
    assert response.status_code == 400
    assert response.data["code"] == "unsafe_address" and response.data["field"] == "source.seeds[1]"
    assert "SOURCES_ALLOWED_NETWORKS" in response.data["detail"]
    assert ("127.0.0.1" if host == "localhost" else host) in response.data["detail"]


@pytest.mark.parametrize("url", ["https://10.0.0.1/org/repo.git", "http://169.254.169.254/latest/repo.git",
                                 "ssh://git@127.0.0.1/org/repo.git", "git@localhost:org/repo.git",
                                 "https://localhost/org/repo.git"])
def test_a_git_source_naming_an_internal_address_is_refused_with_a_clear_400(default_networks, url):
    with pytest.raises(netguard.UnsafeAddress) as err:
        parse_source({"type": "git", "url": url}, user=None, dataset_kind="code")
    assert err.value.status_code == 400 and err.value.code == "unsafe_address" and err.value.field == "source.url"


# --- at crawl time ------------------------------------------------------------------------------------------------

@pytest.fixture
def site():
    s = LocalSite()
    yield s
    s.close()


@pytest.fixture
def web_dataset(db, make_user, make_project):
    from search.models import Dataset

    return Dataset.objects.create(project=make_project("ssrf", make_user()), name="site", kind="web")


def crawl(dataset, seeds):
    """A source stored as it was when its hosts were public (the row is written directly: DNS changed since)."""
    from search.models import Source
    from search.sources.sync import start_sync

    Source.objects.update_or_create(dataset=dataset, defaults={"type": "web", "config": {
        "seeds": seeds, "scope": "same-host", "max_pages": 50, "max_depth": 3, "include": [], "exclude": []}})
    return start_sync(dataset=dataset, run_now=True)


def test_a_source_that_now_points_inside_fails_its_sync_and_fetches_nothing(default_networks, site, web_dataset):
    from search.models import Source

    site.page("/", html_page("Home", "An internal page."))
    with pytest.raises(netguard.UnsafeAddress):
        crawl(web_dataset, [site.url("/")])
    assert site.log == []
    source = Source.objects.get(dataset=web_dataset)
    assert source.last_error.startswith("unsafe_address: 127.0.0.1 resolves to 127.0.0.1")
    assert source.consecutive_failures == 1


def test_redirects_to_metadata_or_another_loopback_address_are_not_followed(settings, site, web_dataset):
    """127.0.0.1 is allowed (as in every test); the redirect targets are in the crawl's scope (they are seeds
    too) but their addresses are not allowed, so neither the seed nor the redirect reaches them."""
    settings.SOURCES_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    settings.SOURCES_CRAWL_DELAY_S = 0.0
    other = LocalSite(host="127.0.0.2")
    other_port = LocalSite()  # 127.0.0.1 on another port: not a seed, so out of scope
    try:
        for s in (other, other_port):
            s.page("/", html_page("Internal", "Internal data that must not be read."))
            s.page("/secret.html", html_page("Secret", "Internal secret that must not be read."))
        site.page("/", html_page("Home", "A page with links that redirect inside.",
                                 links=["/to-metadata", "/to-other-address", "/to-other-port"]))
        site.redirect("/to-metadata", "http://169.254.169.254/latest/meta-data/iam/", 302)
        site.redirect("/to-other-address", other.url("/secret.html"), 302)
        site.redirect("/to-other-port", other_port.url("/secret.html"), 302)
        job = crawl(web_dataset, [site.url("/"), "http://169.254.169.254/latest/", other.url("/")])
        assert job.status == "done", job.error
        errors = "\n".join(job.result["skipped"]["errors"])
        assert f"{site.url('/to-metadata')}: unsafe_address: 169.254.169.254 resolves to 169.254.169.254" in errors
        assert f"{site.url('/to-other-address')}: unsafe_address: 127.0.0.2 resolves to 127.0.0.2" in errors
        assert "http://169.254.169.254/latest/: unsafe_address" in errors  # the seed itself
        assert "timeout" not in errors  # refused before any connection was tried
        assert job.result["skipped"]["out_of_scope"] == 1  # the other port
        assert other.log == [] and other_port.log == []
        from search.models import Document

        assert list(Document.objects.filter(dataset=web_dataset).values_list("path", flat=True)) == [site.url("/")]
    finally:
        other.close()
        other_port.close()


def test_the_connection_goes_to_the_checked_address_even_if_dns_answers_differently_later(
        settings, site, monkeypatch):
    """DNS rebinding: the name resolves to an allowed address when checked and to the metadata address after.
    The fetcher resolves once and connects to what it checked, with the name in the Host header."""
    from search.sources.web.fetcher import Fetcher, FetchPolicy

    settings.SOURCES_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    site.page("/page.html", "hello", content_type="text/plain")
    real = socket.getaddrinfo
    answers = iter(["127.0.0.1"] + ["169.254.169.254"] * 10)

    def rebinding(host, port, *args, **kwargs):
        if host == "rebind.test":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (next(answers), port))]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    fetcher = Fetcher(policy=FetchPolicy(user_agent="t", timeout_s=3.0, delay_s=0.0, per_host=1,
                                         max_page_bytes=10_000), in_scope=lambda u: True)
    try:
        got = fetcher._get(f"http://rebind.test:{site.port}/page.html", accept=None, max_bytes=10_000,
                           follow=lambda u: True, check_robots=False)
    finally:
        fetcher.close()
    assert got.outcome == "ok" and got.body == b"hello"
    assert site.log[0].headers["host"] == f"rebind.test:{site.port}"
    with pytest.raises(netguard.UnsafeAddress):  # the next lookup would have been refused
        netguard.check_url(f"http://rebind.test:{site.port}/")


def _self_signed(tmp_path, name: str):
    """A certificate for `name` only (not for 127.0.0.1), and a client context that trusts just it."""
    import datetime
    import ssl

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_pem, key_pem = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_pem.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_pem.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                          serialization.NoEncryption()))
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert_pem, key_pem)
    return server, ssl.create_default_context(cafile=str(cert_pem))


def test_https_goes_to_the_checked_address_with_the_name_as_sni_and_certificate_check(
        settings, tmp_path, monkeypatch):
    """The connection is made to the IP literal that was checked, yet TLS sends the host name (SNI) and the
    certificate is verified against that name: a certificate for the name passes, the IP is never trusted."""
    from search.sources.web.fetcher import Fetcher, FetchPolicy

    settings.SOURCES_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    server_ctx, client_ctx = _self_signed(tmp_path, "docs.sni.test")
    site = LocalSite(tls=server_ctx)
    real = socket.getaddrinfo
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, port, *a, **kw: (
        [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))] if host == "docs.sni.test"
        else real(host, port, *a, **kw)))
    try:
        site.page("/page.html", "over tls", content_type="text/plain")
        fetcher = Fetcher(policy=FetchPolicy(user_agent="t", timeout_s=3.0, delay_s=0.0, per_host=1,
                                             max_page_bytes=10_000), in_scope=lambda u: True, verify=client_ctx)
        try:
            got = fetcher._get(f"https://docs.sni.test:{site.port}/page.html", accept=None, max_bytes=10_000,
                               follow=lambda u: True, check_robots=False)
            by_ip = fetcher._get(f"https://127.0.0.1:{site.port}/page.html", accept=None, max_bytes=10_000,
                                 follow=lambda u: True, check_robots=False)
        finally:
            fetcher.close()
        assert got.outcome == "ok" and got.body == b"over tls", got.error
        assert site.sni[0] == "docs.sni.test" and site.log[0].headers["host"] == f"docs.sni.test:{site.port}"
        assert by_ip.outcome == "error" and "certificate" in by_ip.error.lower()  # the cert names the host only
    finally:
        site.close()
