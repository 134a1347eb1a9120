"""Model specs -> prepared models (no weights) and loaded ones, with their provenance and
the fingerprint the store compares before any cell is written."""
