"""Services: what the CLI and the app ask of the store and the analysis together — a grid's
report and calibration (reports.py), exported files (exports.py) and provenance documents
(provenance_export.py). Below the commands and the app, above the store and the analysis."""
