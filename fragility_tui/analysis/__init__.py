"""Pure, vectorised statistics of SPEC §4–9 over a dense cube (numpy/scipy only)."""
