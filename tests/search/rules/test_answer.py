"""Streamed, cited answers (POST /api/projects/{slug}/answer): SSE order, extractive and LLM paths, failures,
client disconnects. The LLM is tests/fake_llm.py, a real HTTP server on 127.0.0.1 driven by the real openai client.
"""
from __future__ import annotations

import logging
import time

import pytest

from search.edge.api.rules import encode_sse
from search.rules.answer import extractive_answer, stream_answer
from tests.fake_llm import fake_llm  # noqa: F401 - fixture
from tests.search.ctx_fixtures import edge_index  # noqa: F401 - fixture behind rules_index
from tests.search.rules_fixtures import demo_project, emberfall, parse_sse, rules_index  # noqa: F401 - fixtures

Q = "what happens when I'm pinned?"
LLM_REPLY = "A pinned character's speed is 0 [1]. It can use its action to escape the pin [2]."


@pytest.fixture
def no_llm(settings):
    settings.OPENAI_BASE_URL = ""
    settings.LLM_MODEL = ""


@pytest.fixture
def member_api(demo_project, client_for, make_user):
    from projects.models import Membership

    member = make_user()
    Membership.objects.create(project=demo_project, user=member, role="member")
    return client_for(member)


def _answer(api, project, **body):
    resp = api.post(f"/api/projects/{project.slug}/answer", {"q": Q, **body}, format="json",
                    HTTP_ACCEPT="text/event-stream")
    assert resp.status_code == 200, getattr(resp, "content", b"")
    assert resp["Content-Type"].startswith("text/event-stream")
    return parse_sse(b"".join(resp.streaming_content))


def _names(events):
    return [e for e, _ in events]


def _assert_order(events, *, end="complete"):
    names = _names(events)
    assert names[:3] == ["search", "context", "generation"]
    assert names[-1] == end
    assert set(names[3:-1]) == {"token"} and len(names) > 4


def _tokens(events) -> str:
    return "".join(d["text"] for e, d in events if e == "token")


# ------------------------------------------------------------------------------------------------ extractive

def test_extractive_answer_streams_in_order_with_citations(demo_project, member_api, no_llm):
    events = _answer(member_api, demo_project)
    _assert_order(events)
    ev = dict(events)  # last event of each name
    assert ev["search"]["query"] == Q and ev["search"]["result_count"] > 0
    assert ev["generation"] == {"mode": "extractive", "model": ""}
    done = ev["complete"]
    assert done["mode"] == "extractive" and done["answer"] == _tokens(events)
    assert "speed is 0" in done["answer"]  # the Pinned condition's rule, quoted from the book
    context = {c["n"]: c for c in ev["context"]["chunks"]}
    assert context[1]["section_path"] == ["Conditions", "Pinned"]
    assert done["citations"]
    for c in done["citations"]:
        assert f"[{c['n']}]" in done["answer"]
        assert c["chunk_id"] == context[c["n"]]["chunk_id"]
        assert c["book"] in {"core", "gm-guide"} and c["section_path"] and c["page"] == ""  # Markdown: no pages
        assert c["cite"] == c["book"]
        assert c["file"].startswith(f"{c['book']}/")
    assert any(c["section_path"] == ["Conditions", "Pinned"] and c["book"] == "core" for c in done["citations"])


def test_extractive_answer_picks_best_sentences_and_cites_each():
    results = [
        {"text": "## Pinned\nA pinned character's speed is 0. It has disadvantage on attack rolls. "
                 "The sky is blue over the hearth cities.", "chunk_id": 1},
        {"text": "Escaping a pin takes your action and a Might check against the pinning creature.", "chunk_id": 2},
        {"text": "Weather in the north is cold and wet through most of the year.", "chunk_id": 3},
    ]
    text, cited = extractive_answer(q="pinned character speed escape pin", results=results, max_sentences=3)
    assert text.startswith("A pinned character's speed is 0. [1]")
    assert "Escaping a pin takes your action" in text and text.count("[1]") <= 2
    assert cited == [1, 2] and "Weather" not in text
    assert extractive_answer(q="anything", results=[]) == (
        "No passage in the indexed rulebooks answers this question.", [])


def test_no_results_still_completes_without_citations(no_llm):
    events = parse_sse("".join(encode_sse(stream_answer(q="x", search=lambda: {"results": []}))))
    assert _names(events)[:3] == ["search", "context", "generation"] and _names(events)[-1] == "complete"
    done = dict(events)["complete"]
    assert done["citations"] == [] and done["answer"].startswith("No passage")


def test_search_failure_is_one_error_event(no_llm):
    from config.errors import BadInput

    finished = []

    def boom():
        raise BadInput("nope", field="q")

    events = parse_sse("".join(encode_sse(stream_answer(q="x", search=boom,
                                                             on_finish=lambda s, i: finished.append(s)))))
    assert _names(events) == ["error"] and events[0][1]["detail"] == "nope"
    assert finished == ["error"]


def test_bad_request_is_json_400_before_the_stream(demo_project, member_api, client_for, make_user):
    url = f"/api/projects/{demo_project.slug}/answer"
    bad = member_api.post(url, {"q": ""}, format="json", HTTP_ACCEPT="text/event-stream")
    assert bad.status_code == 400 and bad.json()["field"] == "q"
    assert client_for(make_user()).post(url, {"q": Q}, format="json").status_code == 404


# ------------------------------------------------------------------------------------------------ LLM

def test_llm_answer_streams_tokens_through_the_openai_client(demo_project, member_api, fake_llm):
    fake_llm.reply(LLM_REPLY)
    events = _answer(member_api, demo_project)
    _assert_order(events)
    ev = dict(events)
    assert ev["generation"] == {"mode": "llm", "model": "fake-model"}
    assert _tokens(events) == LLM_REPLY and len([e for e in _names(events) if e == "token"]) > 5
    done = ev["complete"]
    assert done["answer"] == LLM_REPLY and done["mode"] == "llm"
    context = {c["n"]: c for c in ev["context"]["chunks"]}
    assert [c["n"] for c in done["citations"]] == [1, 2]
    assert [c["chunk_id"] for c in done["citations"]] == [context[1]["chunk_id"], context[2]["chunk_id"]]
    (req,) = fake_llm.requests
    assert req["stream"] is True and req["model"] == "fake-model"
    system, user = req["messages"][0]["content"], req["messages"][1]["content"]
    assert "Cite every claim" in system
    assert "[1] (core: Conditions > Pinned)" in user and Q in user


@pytest.mark.parametrize("mode", ["error", "timeout", "garbage"])
def test_llm_failure_before_first_token_falls_back_to_extractive(demo_project, member_api, fake_llm, mode):
    fake_llm.reply(LLM_REPLY)
    fake_llm.mode = mode
    events = _answer(member_api, demo_project)
    _assert_order(events)
    gens = [d for e, d in events if e == "generation"]
    assert len(gens) == 1 and gens[0]["mode"] == "extractive" and gens[0]["fallback_reason"]
    done = dict(events)["complete"]
    assert done["mode"] == "extractive" and "speed is 0" in done["answer"] and done["citations"]
    assert len(fake_llm.requests) == 1  # no retries: the fallback is immediate


def test_llm_failure_mid_stream_ends_with_an_error_event(demo_project, member_api, fake_llm, settings):
    fake_llm.reply(LLM_REPLY)
    fake_llm.token_delay_s = settings.LLM_TIMEOUT_S * 2  # first token at once, then the read times out
    events = _answer(member_api, demo_project)
    assert _names(events) == ["search", "context", "generation", "token", "error"]
    assert events[3][1]["text"] == "A "
    assert events[-1][1]["code"] == "llm_failed" and events[-1][1]["tokens"] == 1


def test_client_disconnect_stops_generation(demo_project, member_api, fake_llm, caplog):
    long_reply = " ".join(f"word{i}" for i in range(400))
    fake_llm.reply(long_reply)
    fake_llm.token_delay_s = 0.02
    resp = member_api.post(f"/api/projects/{demo_project.slug}/answer", {"q": Q}, format="json")
    frames = iter(resp.streaming_content)
    seen = []
    for frame in frames:
        seen.extend(parse_sse(frame))
        if seen[-1][0] == "token":
            break
    assert _names(seen) == ["search", "context", "generation", "token"]
    with caplog.at_level(logging.INFO, logger="search.edge.api.rules"):
        resp.close()  # what the server does when the client goes away: closes the response iterator
    assert any("answer disconnected" in r.getMessage() for r in caplog.records)
    deadline = time.monotonic() + 15
    while fake_llm.aborted_streams == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fake_llm.aborted_streams == 1, "the LLM server should see its stream closed by the client"
    assert fake_llm.tokens_sent < 400


def test_closing_the_generator_reports_disconnected(fake_llm):
    fake_llm.reply("one two three four five six seven eight nine ten")
    fake_llm.token_delay_s = 0.02
    finished = []
    results = [{"chunk_id": 1, "text": "Some rule text about pins.", "book_id": "core", "section_path": ["A"]}]
    gen = stream_answer(q="pins", search=lambda: {"results": results}, on_finish=lambda s, i: finished.append((s, i)))
    names = []
    for event, _data in gen:
        names.append(event)
        if names[-1] == "token":
            break
    gen.close()
    assert finished == [("disconnected", {"tokens": 1})]
