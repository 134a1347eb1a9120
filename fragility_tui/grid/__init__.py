"""Items, the 26 configs, prompt rendering, answer parsing and the DuckDB store (torch-free)."""
