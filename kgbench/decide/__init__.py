"""Deciding what to serve from a sweep: selection, promotion, the cfg and runtime files it writes."""
