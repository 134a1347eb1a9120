"""The in-memory grid: the dense Cube (bits[model, item, config] with its presence mask and
canonical config order), its canonical model and item order, its reference config, and the
synthetic generator (torch-free; the store that holds grids is fragility_tui/store/)."""
