"""train_reranker: a cross-encoder fine-tuned here from the bundled MiniLM on mined pairs, saved with a manifest,
selectable per project (API and admin), named by the query that used it, and evaluated as `trained-rerank`.

The collection is small and synthetic (24 documents, 24 judged queries) so training takes seconds; the tests
check the mechanics and the decisions, not the quality (that is measured on SciFact, README "Trained reranker").
"""
from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from search.engine.project_ranking import reranker_of, save_reranker
from search.quality import reranker_training as rt
from tests.search.ctx_fixtures import edge_index, settled_applier  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db

TOPICS = [
    ("Volcanic ash", "Volcanic ash clouds disrupt aviation and cool the climate for months."),
    ("Coral bleaching", "Warm ocean water causes coral bleaching when symbiotic algae leave the reef."),
    ("Insulin signalling", "Insulin binds its receptor and triggers glucose uptake in muscle cells."),
    ("Glacier retreat", "Mountain glaciers lose mass as summer melt outpaces winter snowfall."),
    ("Antibiotic resistance", "Bacteria acquire resistance genes through plasmids shared between species."),
    ("Sleep and memory", "Deep sleep consolidates memories formed during the previous day."),
    ("Soil nitrogen", "Legume roots host bacteria that fix atmospheric nitrogen into the soil."),
    ("Bird migration", "Migratory birds navigate using the earth's magnetic field and the stars."),
    ("Tidal energy", "Tidal turbines convert the motion of sea water into electricity."),
    ("Vaccine adjuvants", "Adjuvants strengthen the immune response to a vaccine antigen."),
    ("Urban heat islands", "Cities stay warmer than the countryside because asphalt stores heat."),
    ("Bee colony collapse", "Pesticides and mites weaken honey bee colonies until they collapse."),
    ("Ocean acidification", "Absorbed carbon dioxide lowers the pH of sea water and harms shellfish."),
    ("Gut microbiome", "Intestinal bacteria digest fibre into short chain fatty acids."),
    ("Earthquake prediction", "Foreshocks and ground deformation hint at an earthquake but rarely in time."),
    ("Photosynthesis efficiency", "Plants waste light energy when rubisco fixes oxygen instead of carbon."),
    ("Malaria transmission", "Anopheles mosquitoes carry the malaria parasite between human hosts."),
    ("Solar panel recycling", "Old photovoltaic panels contain silver and silicon worth recovering."),
    ("Permafrost thaw", "Thawing permafrost releases methane stored in frozen soil for millennia."),
    ("Stem cell therapy", "Stem cells can be coaxed into heart muscle to repair damaged tissue."),
    ("Plastic in rivers", "Rivers carry most plastic waste from land into the oceans."),
    ("Drought and wheat", "Heat and drought during flowering cut wheat yields sharply."),
    ("Noise and health", "Chronic traffic noise raises blood pressure in nearby residents."),
    ("Wolf reintroduction", "Returning wolves changed elk grazing and let riverside trees recover."),
]
QUESTIONS = [
    "does ash from eruptions affect flights", "why do reefs turn white", "how do muscles take up sugar",
    "why are glaciers shrinking", "how do germs become drug resistant", "does sleep help remember things",
    "how do beans enrich the soil", "how do birds find their way", "can the sea make power",
    "what boosts a vaccine", "why are cities hotter", "why are bee hives dying", "why is the sea getting acidic",
    "what do gut bacteria do with fibre", "can we forecast quakes", "why is photosynthesis wasteful",
    "how is malaria spread", "what is in old solar panels", "what does melting frozen ground release",
    "can stem cells fix a heart", "where does ocean plastic come from", "why do hot dry springs hurt wheat",
    "is road noise bad for you", "what happened after wolves came back",
]


@pytest.fixture
def collection(tmp_path) -> Path:
    root = tmp_path / "toy_sci"
    root.mkdir()
    with (root / "corpus.jsonl").open("w") as fh:
        for n, (title, text) in enumerate(TOPICS):
            fh.write(json.dumps({"_id": f"d{n}", "title": title, "text": text}) + "\n")
    with (root / "queries.jsonl").open("w") as fh:
        for n, q in enumerate(QUESTIONS):
            fh.write(json.dumps({"_id": f"q{n}", "text": q}) + "\n")
    (root / "qrels_train.tsv").write_text("".join(f"q{n}\td{n}\t1\n" for n in range(0, 24, 2)) + "".join(
        f"q{n}\td{n}\t1\n" for n in range(1, 24, 4)))
    (root / "qrels_test.tsv").write_text("".join(f"q{n}\td{n}\t1\n" for n in range(3, 24, 4)))
    return root


@pytest.fixture
def models_home(settings, tmp_path):
    settings.VAR_DIR = tmp_path / "var"
    return settings.VAR_DIR / "models" / "rerankers"


TRAIN_ARGS = ["--max-pairs", "96", "--negatives", "3", "--batch", "4", "--epochs", "3", "--max-length", "64",
              "--no-progress"]


def test_pseudo_query_takes_the_title_then_the_docstring_then_the_first_sentence():
    assert rt.pseudo_query(title="Coral bleaching in warm seas", symbol="", text="x") == "Coral bleaching in warm seas"
    code = 'def deduct(user, amount):\n    """Take credits from a user\'s balance. Raises when short."""\n'
    assert rt.pseudo_query(title="", symbol="deduct", text=code) == "Take credits from a user's balance."
    assert rt.pseudo_query(title="", symbol="", text="Tidal turbines turn sea motion into power. More.") == \
        "Tidal turbines turn sea motion into power."
    assert rt.pseudo_query(title="Ash", symbol="", text="short") == ""  # nothing long enough to ask about


def test_blend_runs_from_the_cross_encoder_alone_to_the_fused_order_unchanged():
    model, prior = [0.1, 0.9, 0.5], [3.0, 1.0, 2.0]
    order = lambda xs: sorted(range(len(xs)), key=lambda i: -xs[i])  # noqa: E731
    assert order(rt.blend_scores(model=model, prior=prior, blend=0.0)) == [1, 2, 0]
    assert order(rt.blend_scores(model=model, prior=prior, blend=1.0)) == [0, 2, 1]
    assert rt.blend_scores(model=model, prior=prior, blend=0.5) == pytest.approx([0.5, 0.5, 0.5 * 0.5 + 0.5 * 0.5])


def test_train_on_judged_queries_writes_a_loadable_model_with_its_manifest(edge_index, collection, models_home):
    out = StringIO()
    call_command("train_reranker", "--beir", str(collection), "--name", "toy-ce", *TRAIN_ARGS, stdout=out,
                 stderr=StringIO())
    manifest = json.loads((models_home / "toy-ce" / "manifest.json").read_text())
    assert manifest["kind"] == "cross-encoder" and manifest["base_model"] == "all-MiniLM-L6-v2"
    assert manifest["seed"] == 13 and manifest["data"]["positives"] == "qrels_train"
    assert manifest["data"]["queries_by_source"] == {"labelled": 18}
    assert manifest["data"]["heldout_queries"] == 5 and manifest["data"]["train_queries"] == 13
    assert 0 < manifest["pairs_seen"] <= 96 and manifest["steps_run"] >= 1
    # the kept state is the best held-out one, never worse than the untrained start (step 0 is a candidate), and
    # the blend chosen with it can always fall back to the fused order (1.0), so it is never below fused there
    assert manifest["heldout"]["reranked_ndcg@10"] == max(h["heldout_ndcg@10"] for h in manifest["history"])
    assert manifest["heldout"]["reranked_ndcg@10"] >= manifest["heldout"]["fused_ndcg@10"]
    assert manifest["blend"] in rt.BLENDS
    assert "trained toy-ce" in out.getvalue()
    from search.engine.rerank import CrossEncoderReranker, load_reranker

    model = load_reranker("toy-ce")
    assert isinstance(model, CrossEncoderReranker) and model.name == "trained:toy-ce"
    docs = ["Coral bleaching: warm water", "Tidal turbines", "Bees and mites"]
    raw = [float(x) for x in model.model.predict([("why do reefs turn white", d) for d in docs])]
    assert len(set(raw)) == 3  # the cross-encoder itself tells the documents apart
    # what reranking uses is that score blended with the fused one at the manifest's share
    scores = model.score("why do reefs turn white", docs, prior=[0.2, 0.9, 0.5])
    assert scores == pytest.approx(rt.blend_scores(model=raw, prior=[0.2, 0.9, 0.5], blend=manifest["blend"]),
                                   abs=1e-3)


def test_a_trained_reranker_scores_each_pair_once_and_cuts_inputs_at_the_configured_length(
        edge_index, collection, models_home, settings):
    from search.engine.rerank import CrossEncoderReranker

    call_command("train_reranker", "--beir", str(collection), "--name", "cache-ce", *TRAIN_ARGS, stdout=StringIO(),
                 stderr=StringIO())
    settings.RERANK_MAX_LENGTH, settings.RERANK_CACHE_PAIRS = 48, 3
    model = CrossEncoderReranker(str(models_home / "cache-ce"))
    assert model.model.max_length == 48
    docs = ["Coral bleaching: warm water", "Tidal turbines", "Bees and mites"]
    first = model.score("why do reefs turn white", docs, prior=[0.2, 0.9, 0.5])
    assert model.scored == 3
    # asked again with other fused scores: no pair is scored again, and the blend follows the new prior
    again = model.score("why do reefs turn white", docs, prior=[0.9, 0.2, 0.5])
    assert model.scored == 3 and again != first
    raw = [float(x) for x in model.model.predict([("why do reefs turn white", d) for d in docs])]
    assert again == pytest.approx(rt.blend_scores(model=raw, prior=[0.9, 0.2, 0.5], blend=model.blend), abs=1e-4)
    # a new candidate is the only pair scored; the cache keeps the 3 most recently used pairs
    model.score("why do reefs turn white", [*docs[1:], "Reef fish"], prior=[0.1, 0.2, 0.3])
    assert model.scored == 4 and len(model._cache) == 3
    model.score("why do reefs turn white", [docs[0]], prior=[1.0])  # evicted as the oldest: scored again
    assert model.scored == 5


def test_same_seed_and_data_train_the_same_model(edge_index, collection, models_home):
    for name in ("run-a", "run-b"):
        call_command("train_reranker", "--beir", str(collection), "--name", name, *TRAIN_ARGS, stdout=StringIO(),
                     stderr=StringIO())
    a, b = (json.loads((models_home / n / "manifest.json").read_text()) for n in ("run-a", "run-b"))
    def strip(history: list[dict]) -> list[dict]:
        return [{k: v for k, v in h.items() if k != "elapsed_s"} for h in history]

    assert len(a["history"]) > 1 and strip(a["history"]) == strip(b["history"])


def test_evaluate_reports_a_trained_rerank_row_beside_the_others(edge_index, collection, models_home, tmp_path,
                                                                 settings):
    call_command("train_reranker", "--beir", str(collection), "--name", "toy-ce", *TRAIN_ARGS, stdout=StringIO(),
                 stderr=StringIO())
    out = StringIO()
    call_command("evaluate", "--beir", str(collection), "--reranker", "toy-ce", "--json", "--no-progress",
                 "--no-save", "--report-dir", str(tmp_path / "r"), stdout=out)
    report = json.loads(out.getvalue())
    assert {"fused", "trained-rerank", "fused+rerank"} <= set(report["pipelines"])
    settings_depth = settings.RERANK_DEPTH  # the report names the depth the row ran at
    assert report["extra"]["trained_reranker"] == {"name": "trained:toy-ce", "rerank_depth": settings_depth}
    assert 0.0 <= report["pipelines"]["trained-rerank"]["ndcg@10"] <= 1.0


def test_evaluate_refuses_an_unknown_reranker_before_any_work(edge_index, collection, models_home, tmp_path):
    with pytest.raises(CommandError, match="neither a reranker trained here"):
        call_command("evaluate", "--beir", str(collection), "--reranker", "no-such-model", "--no-progress",
                     "--report-dir", str(tmp_path))
    with pytest.raises(CommandError, match="needs --reranker"):
        call_command("evaluate", "--beir", str(collection), "--pipelines", "trained-rerank", "--no-progress",
                     "--report-dir", str(tmp_path))


def test_too_few_training_queries_is_a_clear_error_and_writes_nothing(edge_index, collection, models_home):
    (collection / "qrels_train.tsv").write_text("q0\td0\t1\nq2\td2\t1\n")
    with pytest.raises(CommandError, match="at least 10 are needed"):
        call_command("train_reranker", "--beir", str(collection), "--name", "tiny", *TRAIN_ARGS, stdout=StringIO(),
                     stderr=StringIO())
    assert not (models_home / "tiny").exists()


@pytest.fixture
def toy_project(make_user, make_project, edge_index, settled_applier, collection):
    """A project owning the toy collection as its own dataset (no feedback yet)."""
    from search.engine.applier import apply_outbox
    from search.engine.index import get_index
    from search.ingest.writer import sync_documents
    from search.quality.evaluation import beir_documents, load_beir

    owner = make_user("owner@example.com")
    project = make_project("sci", owner)
    from search.models import Dataset

    dataset = Dataset.objects.create(project=project, name="papers", kind="beir")
    sync_documents(dataset=dataset, drafts=beir_documents(load_beir(collection)))
    while apply_outbox(index=get_index()):
        pass
    return project, owner


def test_a_project_model_trained_on_pseudo_queries_becomes_default_only_if_it_beats_fused(toy_project, models_home):
    project, _ = toy_project
    out = StringIO()
    call_command("train_reranker", "--project", "sci", "--name", "sci-ce", *TRAIN_ARGS, stdout=out,
                 stderr=StringIO())
    manifest = json.loads((models_home / "sci-ce" / "manifest.json").read_text())
    assert manifest["data"]["positives"] == "pseudo-queries" and manifest["data"]["feedback_queries"] == 0
    project.refresh_from_db()
    beats = manifest["heldout"]["reranked_ndcg@10"] > manifest["heldout"]["fused_ndcg@10"]
    assert reranker_of(project) == ("sci-ce" if beats else "")
    assert ("now reranks with sci-ce" in out.getvalue()) == beats


def test_a_project_reranks_with_its_trained_model_and_the_query_names_it(toy_project, models_home, client_for):
    project, owner = toy_project
    call_command("train_reranker", "--project", "sci", "--name", "sci-ce", "--no-activate", *TRAIN_ARGS,
                 stdout=StringIO(), stderr=StringIO())
    client = client_for(owner)
    bad = client.patch("/api/projects/sci", {"reranker": "nope"}, format="json")
    assert bad.status_code == 400 and bad.json()["field"] == "reranker" and "sci-ce" in bad.json()["detail"]
    resp = client.patch("/api/projects/sci", {"reranker": "sci-ce"}, format="json")
    assert resp.status_code == 200 and resp.json()["reranker"] == "sci-ce"
    data = client.post("/api/projects/sci/query", {"q": "why do reefs turn white", "top_k": 5}, format="json").json()
    assert data["reranker"] == "trained:sci-ce"
    scores = [r["why"]["rerank_score"] for r in data["results"]]
    assert scores == sorted(scores, reverse=True)
    off = client.patch("/api/projects/sci", {"reranker": ""}, format="json")
    assert off.status_code == 200 and off.json()["reranker"] == ""
    assert client.post("/api/projects/sci/query", {"q": "why do reefs turn white"}, format="json").json()[
        "reranker"] is None


def test_a_cross_encoder_reorders_only_the_fused_top_rerank_depth(toy_project, models_home, settings):
    from projects.models import Project
    from search.engine.pipeline import QuerySpec, run_query

    call_command("train_reranker", "--project", "sci", "--name", "sci-ce", "--no-activate", *TRAIN_ARGS,
                 stdout=StringIO(), stderr=StringIO())
    project = Project.objects.get(slug="sci")
    save_reranker(project=project, name="sci-ce")
    settings.RERANK_DEPTH = 4
    res = run_query(user=None, project=project, spec=QuerySpec(q="why do reefs turn white", top_k=20, candidates=20, log=False))
    ranks = [c.rank_before for c in res.candidates]
    assert sorted(ranks[:4]) == [1, 2, 3, 4]  # the head is the fused top 4, reordered
    assert ranks[4:] == sorted(ranks[4:])  # the rest keep their fused order below it


def test_staff_pick_a_projects_reranker_in_the_admin_among_the_trained_ones(make_user, make_project, client,
                                                                              models_home):
    (models_home / "sci-ce").mkdir(parents=True)
    (models_home / "sci-ce" / "manifest.json").write_text(json.dumps({
        "name": "sci-ce", "created": "2026-11-24T10:00:00Z",
        "heldout": {"reranked_ndcg@10": 0.71, "fused_ndcg@10": 0.65}}))
    project = make_project("sci", make_user())
    client.force_login(make_user("staff@example.com", staff=True))
    url = f"/admin/projects/project/{project.pk}/change/"
    html = client.get(url).content.decode()
    assert "sci-ce — held-out nDCG@10 0.71 vs fused 0.65" in html
    # the ranking is search's inline on projects' own project admin (projects.admin.extend_project_admin)
    form = {"slug": "sci", "name": "Sci", "quota_documents": "", "quota_chunks": "", "quota_bytes": "",
            "memberships-TOTAL_FORMS": "0", "memberships-INITIAL_FORMS": "0",
            "ranking-TOTAL_FORMS": "1", "ranking-INITIAL_FORMS": "0", "ranking-0-project": str(project.pk)}
    assert client.post(url, {**form, "ranking-0-reranker": "not-trained"}).status_code == 200  # re-shown, an error
    project.refresh_from_db()
    assert reranker_of(project) == ""
    assert client.post(url, {**form, "ranking-0-reranker": "sci-ce"}).status_code == 302
    project.refresh_from_db()
    assert reranker_of(project) == "sci-ce"


def test_a_projects_feedback_is_the_positives_once_it_has_enough(toy_project, models_home):
    from search.models import Chunk, Feedback, QuerySession

    project, owner = toy_project
    by_doc = dict(Chunk.objects.filter(dataset__project=project).values_list("path", "id"))
    for n in range(12):  # ▲ on the right paper for 12 questions, and one ▼ that must not count
        session = QuerySession.objects.create(user=owner, project=project, query=QUESTIONS[n])
        Feedback.objects.create(session=session, chunk_id=by_doc[f"d{n}"], user=owner, relevance=3)
    low = QuerySession.objects.create(user=owner, project=project, query=QUESTIONS[20])
    Feedback.objects.create(session=low, chunk_id=by_doc["d20"], user=owner, relevance=0)
    assert {e.query for e in rt.feedback_examples(project_id=project.pk)} == set(QUESTIONS[:12])
    call_command("train_reranker", "--project", "sci", "--name", "fb-ce", "--min-feedback", "10", "--no-activate",
                 *TRAIN_ARGS, stdout=StringIO(), stderr=StringIO())
    data = json.loads((models_home / "fb-ce" / "manifest.json").read_text())["data"]
    assert data["positives"] == "feedback" and data["feedback_queries"] == 12
    assert data["queries_by_source"] == {"feedback": 12}
