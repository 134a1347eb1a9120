"""The harness: the 26 configs, prompt rendering and the answer parser (torch-free)."""
