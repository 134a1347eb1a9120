"""`run --ray`: the launcher (a driver that shards a run over Ray workers and merges their
parts) and the tasks its workers run."""
