"""A realistic synthetic directory of Indian tech professionals (deterministic for a seed).

Why templates: card texts are built from a bounded set of (role, seniority,
company, variant) templates, so a 10k-person / 60k-card benchmark directory
embeds a few thousand unique texts (EmbeddingCache) instead of 60k+.
"""
from __future__ import annotations

import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Any

from people.importing.importer import import_records, rebuild_hnsw
from people.models import Person
from people.parsing import curated

if TYPE_CHECKING:
    from io import TextIOBase

FIRST = ("Aarav Vivaan Aditya Vihaan Arjun Sai Reyansh Krishna Ishaan Rohan Ananya Diya Saanvi Aadhya Kavya Meera "
         "Priya Sneha Pooja Neha Rahul Amit Vikram Karthik Siddharth Nikhil Varun Deepak Suresh Ramesh Lakshmi "
         "Divya Swati Shreya Nandini Farhan Imran Zoya Ayesha Gurpreet Harpreet Simran Manish Tanvi Ishita Yash "
         "Abhishek Rajesh Venkat Srinivas Anjali Bhavna Chetan Dev Esha Gaurav Hemant Jaya Kunal Lavanya").split()
LAST = ("Sharma Verma Gupta Iyer Iyengar Reddy Rao Nair Menon Pillai Kumar Singh Patel Shah Mehta Desai Joshi "
        "Kulkarni Deshpande Banerjee Chatterjee Mukherjee Das Bose Khan Ahmed Qureshi Gill Sandhu Chopra Malhotra "
        "Kapoor Agarwal Jain Bhatt Naidu Hegde Shetty Krishnan Subramanian Mishra Tiwari Pandey Yadav").split()

ROLES = {  # intent -> (role title, domain-ish skills, evidence templates)
    "backend": ("Backend Engineer", ["java", "spring boot", "kafka", "postgresql", "redis", "microservices", "go"],
                ["Built a {skill} service handling {n}k requests per second", "Cut p99 latency by {p}% on the {team} APIs"]),
    "frontend": ("Frontend Engineer", ["react", "typescript", "javascript", "graphql", "node.js"],
                 ["Rebuilt the {team} web app in {skill}", "Improved page load time by {p}% with {skill}"]),
    "fullstack": ("Full Stack Engineer", ["react", "node.js", "typescript", "postgresql", "django", "python"],
                  ["Shipped the {team} dashboard end to end with {skill}", "Owned {skill} services and the UI"]),
    "mobile": ("Android Engineer", ["kotlin", "android", "flutter", "react native", "swift"],
               ["Shipped the {team} app flows in {skill}", "Reduced app crash rate by {p}% using {skill}"]),
    "data": ("Data Engineer", ["spark", "airflow", "kafka", "snowflake", "dbt", "python", "sql"],
             ["Built {skill} pipelines moving {n} TB a day", "Designed the {team} data warehouse on {skill}"]),
    "ml": ("Machine Learning Engineer", ["python", "pytorch", "tensorflow", "llm", "nlp", "recommendation systems"],
           ["Trained {skill} models for {team}", "Raised {team} model precision by {p}% with {skill}"]),
    "devops": ("DevOps Engineer", ["kubernetes", "terraform", "aws", "docker", "ci/cd", "linux"],
               ["Migrated {team} workloads to {skill}", "Cut cloud spend by {p}% with {skill}"]),
    "sre": ("Site Reliability Engineer", ["kubernetes", "linux", "go", "aws", "terraform"],
            ["Ran on-call for {team} with {skill}", "Raised {team} availability to 99.9{p} with {skill}"]),
    "security": ("Security Engineer", ["appsec", "aws", "python", "linux"],
                 ["Led threat modelling for {team}", "Built {skill} scanning into CI for {team}"]),
    "qa": ("SDET", ["java", "python", "selenium", "ci/cd"],
           ["Automated {team} regression suites with {skill}", "Cut release QA time by {p}%"]),
    "product": ("Product Manager", ["payments", "growth", "sql", "figma"],
                ["Launched {team} features used by {n} lakh users", "Grew {team} conversion by {p}%"]),
    "analytics": ("Data Analyst", ["sql", "tableau", "python", "pandas"],
                  ["Built {team} dashboards in {skill}", "Found a {p}% leak in the {team} funnel with {skill}"]),
}
SENIORITY = [("junior", "", 0), ("mid", "", 2), ("senior", "Senior ", 5), ("lead", "Lead ", 8),
             ("staff", "Staff ", 10), ("manager", "Engineering Manager, ", 9)]
SALARY_LPA = {"junior": (6, 14), "mid": (14, 28), "senior": (25, 50), "lead": (40, 70), "staff": (55, 95),
              "manager": (50, 90)}
COMPANY_DOMAIN = {"flipkart": "ecommerce", "myntra": "ecommerce", "meesho": "ecommerce", "amazon": "ecommerce",
                  "nykaa": "ecommerce", "bigbasket": "ecommerce", "walmart": "ecommerce", "swiggy": "foodtech",
                  "zomato": "foodtech", "dunzo": "foodtech", "razorpay": "fintech", "paytm": "fintech",
                  "phonepe": "fintech", "cred": "fintech", "zerodha": "fintech", "groww": "fintech", "juspay": "fintech",
                  "goldman sachs": "fintech", "jp morgan": "fintech", "ola": "mobility", "uber": "mobility",
                  "freshworks": "saas", "zoho": "saas", "postman": "saas", "browserstack": "saas", "atlassian": "saas",
                  "salesforce": "saas", "adobe": "saas", "oracle": "saas", "microsoft": "saas", "google": "adtech",
                  "inmobi": "adtech", "byjus": "edtech", "unacademy": "edtech", "dream11": "gaming",
                  "sharechat": "saas", "oyo": "mobility", "makemytrip": "mobility", "infosys": "it services",
                  "tcs": "it services", "wipro": "it services", "hcl": "it services"}
HUB_CITIES = ["bangalore"] * 5 + ["hyderabad"] * 2 + ["pune"] * 2 + ["mumbai"] * 2 + ["gurugram", "noida", "chennai",
                                                                                      "delhi", "kolkata", "kochi"]


@dataclass(frozen=True)
class _Stint:
    """One job of a generated career: the work, its seniority (a SENIORITY row), where and when.

    Why one value: the career walk decides these together and the card is written from all of them."""

    intent: str
    sen: tuple
    company: str
    start: date
    end: date | None  # None: the current job
    city: str
    country: str = "india"


def _card(rng: random.Random, *, stint: _Stint) -> dict[str, Any]:
    intent, sen, company, city, country = stint.intent, stint.sen, stint.company, stint.city, stint.country
    start, end = stint.start, stint.end
    role, skills, evidence = ROLES[intent]
    variant = rng.randrange(2)
    picked = skills[variant::2][:3] or skills[:3]
    team = rng.choice(curated.TEAMS)
    title = f"{sen[1]}{role}".strip()
    # no company or team in the text: those are structured fields (filters, FTS), and keeping them out
    # bounds the number of distinct texts to embed (see the module docstring)
    summary = (f"{title} working on {intent} systems with {', '.join(picked)}." if variant == 0
               else f"{intent.title()} work as {title.lower()}, mainly {', '.join(picked)}.")
    children = []
    if rng.random() < 0.5:
        tmpl = evidence[variant % len(evidence)]
        children.append({"title": "Impact", "summary": tmpl.format(skill=picked[0], team=team, n=[5, 20, 50][variant],
                                                                  p=[20, 35, 50][variant]),
                         "search_phrases": [picked[0]], "child_type": "evidence"})
    return {
        "title": title, "summary": summary, "company_norm": company, "team_norm": team, "intent_primary": intent,
        "domain": COMPANY_DOMAIN.get(company, "saas"), "sub_domain": team, "employment_type": "full_time",
        "seniority_level": sen[0], "city": city, "country": country,
        "location_text": f"{city.title()}, {country.title()}",
        "start_date": start.isoformat(), "end_date": end.isoformat() if end else None, "is_current": end is None,
        "search_phrases": [f"{intent} engineer" if intent not in ("product", "analytics") else intent] + picked,
        "visibility": "public" if rng.random() > 0.03 else "hidden", "children": children,
    }


def generate_records(count: int, *, seed: int = 7, cards_per_person: tuple[int, int] = (4, 8),
                     companies: list[str] | None = None, cities: dict[str, str] | None = None) -> Iterator[dict]:
    """`companies` and `cities` (city -> country) replace the Indian demo names: a directory the curated vocabulary
    knows nothing about (what the parser must learn from the data)."""
    rng = random.Random(seed)
    companies = list(companies or curated.COMPANIES)
    hubs = list(cities) if cities else HUB_CITIES
    country_of = cities or {}
    intents = list(ROLES)
    for i in range(count):
        first, last = rng.choice(FIRST), rng.choice(LAST)
        intent = rng.choice(intents)
        home = rng.choice(hubs)
        n_cards = rng.randint(*cards_per_person)
        career_start = date(rng.randint(2008, 2020), rng.randint(1, 12), 1)
        cursor, cards, sen_idx = career_start, [], 0
        for j in range(n_cards):
            years = rng.randint(1, 3)
            end = date(min(cursor.year + years, 2026), rng.randint(1, 12), 1)
            if end <= cursor:
                end = date(cursor.year + 1, cursor.month, 1)
            last_card = j == n_cards - 1 or end >= date(2025, 6, 1)
            is_current = last_card and rng.random() < 0.75
            city = home if rng.random() < 0.7 else rng.choice(hubs)
            if rng.random() < 0.15:
                intent = rng.choice(intents)
            cards.append(_card(rng, stint=_Stint(
                intent=intent, sen=SENIORITY[min(sen_idx, len(SENIORITY) - 1)], company=rng.choice(companies),
                start=cursor, end=None if is_current else end, city=city, country=country_of.get(city, "india"))))
            if rng.random() < 0.6:
                sen_idx += 1
            cursor = end
            if last_card:
                break
        sen = cards[-1]["seniority_level"]
        lo, hi = SALARY_LPA.get(sen, (10, 30))
        otw = rng.random() < 0.3
        slug = f"{first}.{last}{i}".lower()
        yield {
            "id": str(uuid.UUID(int=rng.getrandbits(128))), "external_id": f"demo-{seed}-{i}",
            "display_name": f"{first} {last}", "headline": f"{cards[-1]['title']} at {cards[-1]['company_norm'].title()}",
            "email": f"{slug}@example.in", "phone": f"+91 9{rng.randint(100000000, 999999999)}",
            "linkedin_url": f"https://www.linkedin.com/in/{slug.replace('.', '-')}",
            "profile": {
                "bio": f"{cards[-1]['title']} based in {home.title()} with {len(cards)} roles across "
                       f"{', '.join(dict.fromkeys(c['company_norm'].title() for c in cards))}.",
                "current_city": home, "open_to_work": otw, "open_to_contact": otw or rng.random() < 0.35,
                "work_preferred_locations": [home] + ([rng.choice(hubs)] if rng.random() < 0.4 else []),
                "work_preferred_salary_min": rng.randint(lo, hi) * 100_000 if rng.random() < 0.8 else None,
                "contact_email": f"{slug}@example.in", "contact_phone": f"+91 9{rng.randint(100000000, 999999999)}"},
            "cards": cards,
        }


def load_demo(stdout: TextIOBase | None = None, *, count: int = 200, seed: int = 7,
              embed: str = "inline") -> dict[str, int]:
    """Load a small directory for `make run` (skipped when demo people already exist)."""
    if Person.objects.filter(external_id__startswith=f"demo-{seed}-").exists():
        if stdout:
            stdout.write("people demo: already loaded\n")
        return {"people": 0, "cards": 0, "children": 0}
    report = import_records(((i, r) for i, r in enumerate(generate_records(count, seed=seed), 1)), embed=embed,
                            total=count, show_progress=stdout is not None)
    rebuild_hnsw()
    if stdout:
        stdout.write(f"people demo: {report.people} people, {report.cards} cards, {report.children} evidence cards\n")
    return {"people": report.people, "cards": report.cards, "children": report.children}
