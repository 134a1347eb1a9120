"""fragility-tui: is a multiple-choice leaderboard gap real, or made by the harness?"""

__version__ = "0.1.0"
SPEC_VERSION = "5"
