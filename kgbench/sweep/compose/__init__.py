"""A job composed: its settings and engine choice (spec, engine_choice) and its KataGo cfg rendered (render)."""
