"""What a search is to its user: running and replaying one (searches), its session (sessions), why each person
matched (why), profiles behind the session (profiles) and contact unlocks (unlocks). The edge calls these."""
