"""Planning a run's work without a model: item requests, score types, the prompts' prefix
tree, numerics and the token budget (torch only where out-of-memory is recognised)."""
