"""The DuckDB store and every SQL statement: schema, runs, models, caches, the grid writer,
imports, merge, parts, lm-eval interop and the shipped grids."""
