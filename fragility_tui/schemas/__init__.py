"""Versioned schemas of the JSON documents the runner writes and the app reads: a run's
provenance (provenance.py) and its progress events (events.py). Torch-free and below the
store, so the runner, the store, the CLI and the app read the same typed records instead of
string keys. Each document carries a `schema` number, read tolerantly (fields.py): older
documents lack fields (None), newer ones may carry fields this version does not know (kept
in `extra`), and a field of the wrong JSON type is a SchemaError naming it."""
