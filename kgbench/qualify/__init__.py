"""Node qualification: `python -m kgbench.qualify` runs the whole seed workflow on one node within a time budget and
leaves one results folder (results.json, report.md, plots/). See kgbench/qualify/__main__.py and docs/qualify.md."""

__all__: list[str] = []
