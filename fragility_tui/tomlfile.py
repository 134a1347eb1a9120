"""TOML reading on every supported Python: `tomllib` from 3.11, the same parser published as
`tomli` on 3.10 (Ubuntu 22.04's default, common on GPU servers)."""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

__all__ = ["tomllib"]
