"""Pure, vectorised statistics of SPEC §4–9 over a dense cube (numpy only).

Entry points: `report.build_report` (the whole report as a JSON-ready dict),
`decisions.decide` (one pair, Compare pane), and the building blocks in `classify`,
`pairs`, `rankings`, `axes` and `itemstats`. docs/spec.md maps each SPEC statistic to
its function.
"""
