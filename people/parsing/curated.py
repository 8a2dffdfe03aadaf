"""Shared vocabularies: the deterministic parser reads them and the demo generator writes from them.

Why shared: the parser must recognise exactly the companies, cities and skills
the synthetic directory uses, and real aliases (Bengaluru, Bombay, Gurgaon).
"""
from __future__ import annotations

COMPANIES = {
    # norm: aliases
    "flipkart": ["flipkart"], "swiggy": ["swiggy"], "zomato": ["zomato"], "razorpay": ["razorpay"],
    "paytm": ["paytm", "one97"], "phonepe": ["phonepe", "phone pe"], "cred": ["cred"], "zerodha": ["zerodha"],
    "ola": ["ola", "ola cabs"], "meesho": ["meesho"], "myntra": ["myntra"], "freshworks": ["freshworks"],
    "zoho": ["zoho"], "infosys": ["infosys"], "tcs": ["tcs", "tata consultancy services", "tata consultancy"],
    "wipro": ["wipro"], "hcl": ["hcl", "hcltech", "hcl technologies"], "google": ["google", "alphabet"],
    "microsoft": ["microsoft", "msft"], "amazon": ["amazon", "aws"], "uber": ["uber"], "atlassian": ["atlassian"],
    "byjus": ["byjus", "byju's", "byju"], "unacademy": ["unacademy"], "nykaa": ["nykaa"],
    "dream11": ["dream11", "dream 11"], "postman": ["postman"], "browserstack": ["browserstack"],
    "inmobi": ["inmobi"], "groww": ["groww"], "sharechat": ["sharechat"], "dunzo": ["dunzo"],
    "bigbasket": ["bigbasket", "big basket"], "oyo": ["oyo", "oyo rooms"], "makemytrip": ["makemytrip", "mmt"],
    "juspay": ["juspay"], "walmart": ["walmart", "walmart labs"], "adobe": ["adobe"], "oracle": ["oracle"],
    "salesforce": ["salesforce"], "goldman sachs": ["goldman sachs", "goldman"], "jp morgan": ["jp morgan", "jpmorgan", "jpmc"],
}
TEAMS = ["payments", "search", "checkout", "growth", "platform", "infrastructure", "ads", "supply chain", "logistics",
         "fraud", "risk", "catalog", "recommendations", "data platform", "ml platform", "mobile", "web", "identity",
         "notifications", "pricing", "lending", "trust and safety", "developer experience", "core banking",
         "marketplace", "delivery", "maps", "security", "billing", "analytics"]
CITIES = {
    "bangalore": ["bangalore", "bengaluru", "blr"], "mumbai": ["mumbai", "bombay"], "delhi": ["delhi", "new delhi"],
    "gurugram": ["gurugram", "gurgaon"], "noida": ["noida"], "hyderabad": ["hyderabad", "hyd"],
    "chennai": ["chennai", "madras"], "pune": ["pune"], "kolkata": ["kolkata", "calcutta"],
    "ahmedabad": ["ahmedabad"], "jaipur": ["jaipur"], "kochi": ["kochi", "cochin"], "indore": ["indore"],
    "chandigarh": ["chandigarh"], "coimbatore": ["coimbatore"], "trivandrum": ["trivandrum", "thiruvananthapuram"],
}
COUNTRIES = {"india": ["india"], "united states": ["usa", "united states", "us"], "singapore": ["singapore"],
             "united kingdom": ["uk", "united kingdom", "london"], "germany": ["germany", "berlin"]}
CITY_COUNTRY = {c: "india" for c in CITIES}
INTENT_WORDS = {
    "backend": ["backend", "back-end", "back end", "server side", "server-side", "api"],
    "frontend": ["frontend", "front-end", "front end", "react developer", "ui engineer"],
    "fullstack": ["fullstack", "full-stack", "full stack"],
    "mobile": ["mobile", "android", "ios"],
    "data": ["data engineer", "data engineering", "data engineers", "etl"],
    "ml": ["ml", "machine learning", "ai engineer", "deep learning", "mlops", "nlp", "computer vision"],
    "devops": ["devops", "dev ops", "platform engineer", "cloud engineer"],
    "sre": ["sre", "site reliability"],
    "security": ["security engineer", "appsec", "infosec", "security researcher"],
    "qa": ["qa", "sdet", "test engineer", "quality assurance"],
    "product": ["product manager", "product managers", "pm ", "product management"],
    "design": ["designer", "designers", "ux", "ui/ux"],
    "analytics": ["data analyst", "analysts", "business analyst", "analytics"],
    "management": ["engineering manager", "engineering managers", "em ", "head of engineering"],
    "embedded": ["embedded", "firmware"],
    "research": ["research scientist", "researcher"],
}
SENIORITY_WORDS = {
    "intern": ["intern", "interns", "internship"], "junior": ["junior", "entry level", "fresher", "freshers", "jr"],
    "mid": ["mid-level", "mid level", "sde 2", "sde2", "sde-2"], "senior": ["senior", "sr", "sde 3", "sde3", "sde-3"],
    "staff": ["staff"], "principal": ["principal"], "lead": ["lead", "tech lead", "leads"],
    "manager": ["manager", "managers"], "director": ["director", "directors"], "vp": ["vp", "vice president"],
    "cxo": ["cto", "ceo", "cxo", "founder", "co-founder"],
}
EMPLOYMENT_WORDS = {"full_time": ["full time", "full-time", "fulltime"], "part_time": ["part time", "part-time"],
                    "contract": ["contract", "contractor", "contractual"], "internship": ["internship"],
                    "freelance": ["freelance", "freelancer", "freelancers"]}
SKILLS = ["python", "java", "go", "golang", "kotlin", "swift", "rust", "c++", "javascript", "typescript", "react",
          "node", "node.js", "django", "spring", "spring boot", "kafka", "redis", "postgres", "postgresql", "mysql",
          "mongodb", "elasticsearch", "kubernetes", "docker", "terraform", "aws", "gcp", "azure", "spark", "airflow",
          "pytorch", "tensorflow", "llm", "llms", "rag", "graphql", "grpc", "microservices", "distributed systems",
          "flutter", "react native", "scala", "hadoop", "snowflake", "dbt", "figma", "tableau", "sql", "pandas",
          "upi", "payments", "fintech", "e-commerce", "ecommerce", "edtech", "healthtech", "logistics", "search",
          "recommendation systems", "fraud detection", "system design", "ci/cd", "linux", "nlp", "computer vision"]
DOMAINS = {"fintech": ["fintech", "payments", "lending", "upi", "banking"], "ecommerce": ["e-commerce", "ecommerce", "retail"],
           "foodtech": ["food delivery", "foodtech"], "edtech": ["edtech"], "healthtech": ["healthtech", "healthcare"],
           "mobility": ["mobility", "ride hailing"], "saas": ["saas", "b2b"], "gaming": ["gaming", "fantasy sports"],
           "it services": ["it services", "consulting"], "adtech": ["adtech", "advertising"]}

# Words that carry the query's grammar, not a name: the parser skips them, and a directory value spelled like one
# (a company called "search", a team called "the") is not trusted as a name (people/parsing/gazetteer.py).
STOP_WORDS = frozenset(
    "a an the and or of in at for to with who whose which that from on by as is are was were be been having has "
    "have worked working work experience experienced people person engineers engineer developers developer folks "
    "candidates profiles someone anyone find show me get looking search for us our india based not no excluding "
    "except exclude other apart".split())
COMMON_WORDS = frozenset(
    STOP_WORDS
    | {w for table in (INTENT_WORDS, SENIORITY_WORDS, EMPLOYMENT_WORDS) for aliases in table.values()
       for a in aliases for w in a.split()}
    | set("team teams org group vertical squad years year yoe months open job jobs role roles lpa lakh lakhs crore "
          "salary budget under below above after before since until between during currently current former ex "
          "now previously who also only all any some more less than then near around remote hybrid onsite "
          "good great best top strong expert skilled".split()))
