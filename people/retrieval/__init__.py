"""Finding and ordering people for parsed constraints: the cards' search columns and vectors (indexing), the tiers
and their relaxation policies (tiers, relaxation), the lexical bonus (lexical) and the ranking (ranking)."""
