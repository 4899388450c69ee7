"""Query admission, the same for every front end (POST /analysis and /ws): the per-query checks (`checks`), the
in-flight bound (`limits`) and the priority classes (`priority`). No web framework here."""
