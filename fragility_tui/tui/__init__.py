"""The Textual app. Imports textual; never torch or transformers (runs are subprocesses)."""
