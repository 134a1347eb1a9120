"""What an offline install needs, decided without a network: the logic shared by
tools/wheelhouse.py (run on a connected machine) and tools/install_offline.py (run on the
air-gapped box), tested by tests/test_offline_install.py.

Standard library plus `packaging` (pip's own copy where it is not installed), Python 3.10+.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from urllib.parse import unquote

try:
    from packaging.markers import Marker
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version
except ImportError:  # a bare interpreter: pip always carries a copy
    from pip._vendor.packaging.markers import Marker  # type: ignore[no-redef]
    from pip._vendor.packaging.requirements import (  # type: ignore[no-redef]
        InvalidRequirement, Requirement)
    from pip._vendor.packaging.specifiers import SpecifierSet  # type: ignore[no-redef]
    from pip._vendor.packaging.version import InvalidVersion, Version  # type: ignore[no-redef]

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
# Reused from the target, never carried (a CUDA torch wheel alone is ~900 MB): their supported
# ranges are the runner extra's specifiers in pyproject.toml.
REUSED = ("torch", "transformers")
# What the reference air-gapped box has (README, "Offline install"), when no freeze is given.
REFERENCE_BOX = REPO / "tools" / "reference-box.txt"
__all__ = ["InvalidRequirement", "Marker", "Requirement", "SpecifierSet", "Version", "canonical", "parse_freeze",
           "project_requirements", "build_requirements", "supported_ranges", "range_error",
           "target_environment", "applies", "plan_downloads", "public_version", "show"]


def canonical(name: str) -> str:
    """PEP 503's normal form: `Textual_Plot` and `textual-plot` are one project."""
    return re.sub(r"[-_.]+", "-", name).lower()


def public_version(version: str) -> str:
    """`2.11.0+cu130` -> `2.11.0`: the index has the public release only."""
    return version.split("+", 1)[0]


def parse_freeze(text: str) -> dict[str, str | None]:
    """`pip freeze` output (or a plain list of names) -> {name: version or None}.

    None means present at an unknown version (a bare name, or `name @ URL`): taken as
    satisfying every range, since nothing can be checked."""
    present: dict[str, str | None] = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):  # -e, -r, --index-url: not a package here
            continue
        m = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*"
                         r"(?:(?:===?)\s*([^\s;]+)|@\s*\S+)?\s*(?:;.*)?", line)
        if not m:
            raise ValueError(f"not a freeze line: {raw!r}")
        version = m.group(2)
        url = re.search(r"@\s*(\S+\.whl)$", line)
        if url:  # `torch @ file:///wheels/torch-2.11.0%2Bcu130-cp312-...whl`
            version = unquote(url.group(1).rsplit("/", 1)[-1]).split("-")[1]
        present[canonical(m.group(1))] = version
    return present


def _pyproject(path: Path | None = None) -> dict:
    return tomllib.loads((path or REPO / "pyproject.toml").read_text())


def project_requirements(extras: list[str], pyproject: Path | None = None) -> list[Requirement]:
    """The project's dependencies plus those of `extras` (an unknown extra is an error)."""
    project = _pyproject(pyproject)["project"]
    optional = project.get("optional-dependencies", {})
    unknown = [e for e in extras if e not in optional]
    if unknown:
        raise ValueError(f"unknown extra {', '.join(unknown)} (pyproject.toml has "
                         f"{', '.join(sorted(optional))})")
    lines = list(project["dependencies"])
    for extra in extras:
        lines += optional[extra]
    return [Requirement(line) for line in lines]


def build_requirements(pyproject: Path | None = None) -> list[Requirement]:
    """What pip needs to build the project itself (setuptools): carried even when the target
    has it, since pip builds in an isolated environment filled from the wheelhouse."""
    return [Requirement(r) for r in _pyproject(pyproject)["build-system"]["requires"]]


def supported_ranges(pyproject: Path | None = None) -> dict[str, SpecifierSet]:
    """torch's and transformers' ranges, as the runner extra states them."""
    ranges = {canonical(r.name): r.specifier for r in project_requirements(["runner"], pyproject)}
    return {name: ranges[name] for name in REUSED}


def range_error(installed: dict[str, str | None], ranges: dict[str, SpecifierSet]) -> str | None:
    """One line naming both versions and both ranges when either is missing or outside its
    range; None when both fit. A version that cannot be read counts as outside."""
    bad = []
    for name in REUSED:
        version = installed.get(name)
        if version is None or not _contains(ranges[name], version):
            bad.append(name)
    if not bad:
        return None
    found = " and ".join(f"{name} {installed.get(name) or '(not installed)'}" for name in REUSED)
    wanted = " and ".join(f"{name}{show(ranges[name])}" for name in REUSED)
    return (f"{found} found; fragility-tui supports {wanted} (pyproject.toml, runner extra): "
            f"{' and '.join(bad)} outside the range")


def show(spec: SpecifierSet) -> str:
    """`>=2.11,<3`, the lower bound first (str() sorts `<3` ahead)."""
    return ",".join(sorted(map(str, spec), key=lambda s: (not s.startswith(">"), s)))


def _contains(spec: SpecifierSet, version: str) -> bool:
    try:
        return spec.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


def target_environment(python: str, platform: str) -> dict[str, str]:
    """PEP 508 marker values of a target given as `3.12` and a wheel platform tag."""
    if platform.startswith(("manylinux", "musllinux", "linux")):
        system, sys_platform = "Linux", "linux"
    elif platform.startswith("macosx"):
        system, sys_platform = "Darwin", "darwin"
    elif platform.startswith("win"):
        system, sys_platform = "Windows", "win32"
    else:
        raise ValueError(f"unknown platform tag {platform!r}")
    machine = re.sub(r"^(manylinux\d*|musllinux|linux|macosx)(_\d+_\d+)?_", "", platform)
    machine = {"amd64": "AMD64", "win32": "x86"}.get(machine.replace("win_", ""), machine)
    major_minor = ".".join(python.split(".")[:2])
    return {"python_version": major_minor, "python_full_version": f"{major_minor}.0",
            "implementation_name": "cpython", "platform_python_implementation": "CPython",
            "implementation_version": f"{major_minor}.0", "os_name": "nt" if system == "Windows"
            else "posix", "sys_platform": sys_platform, "platform_system": system,
            "platform_machine": machine, "platform_release": "", "platform_version": "",
            "extra": ""}


def applies(req: Requirement, env: dict[str, str], extras: frozenset[str] = frozenset()) -> bool:
    """Whether `req` is wanted on the target, for a dependency asked for with `extras`."""
    if req.marker is None:
        return True
    return any(req.marker.evaluate({**env, "extra": extra}) for extra in ({""} | set(extras)))


def plan_downloads(roots: list[Requirement], present: dict[str, str | None],
                   resolved: dict[str, tuple[str, list[str]]], env: dict[str, str],
                   always: list[Requirement] = ()):
    """Walk the dependency graph from `roots`: (download, reused, problems, with_extras).

    `resolved` is a resolver's answer for the target ({name: (version, Requires-Dist lines)});
    `present` is the target's freeze. A requirement the target satisfies is reused and its own
    dependencies are not walked (the target already has what it needs); one the target has
    at a version outside the requirement is a problem (for torch and transformers) or is
    carried at the resolved version (pip puts a newer copy in the venv). `always` (the build
    requirements) are carried whatever the target has. A package the target has but that is
    asked for with extras (`markdown-it-py[linkify]`) may lack what the extras pull in: it
    is named in `with_extras` until `resolved` covers it, then walked like a missing one
    (the resolver pins it to the target's version, so pip keeps the target's copy)."""
    download: dict[str, str] = {}
    reused: dict[str, str | None] = {}
    problems: list[str] = []
    with_extras: set[str] = set()
    seen: set[tuple[str, frozenset[str]]] = set()
    queue: list[tuple[Requirement, str, bool]] = [(r, "fragility-tui", False) for r in roots
                                                  if applies(r, env)]
    queue += [(r, "the build", True) for r in always if applies(r, env)]
    while queue:
        req, parent, carry = queue.pop(0)
        name = canonical(req.name)
        if name in present and not carry:
            version = present[name]
            if version is None or _contains(req.specifier, version):
                reused[name] = version
                if not req.extras:
                    continue
                if name not in resolved:
                    with_extras.add(name)
                    continue
            if name in REUSED:
                problems.append(f"{name} {version} on the target; {parent} needs {name}{req.specifier}")
                continue
        if name not in resolved:
            problems.append(f"{name}: needed by {parent}, missing from the resolution")
            continue
        version, requires = resolved[name]
        if not _contains(req.specifier, version):
            problems.append(f"{name} {version} resolved; {parent} needs {name}{req.specifier}")
            continue
        download[name] = version
        extras = frozenset(req.extras)
        if (name, extras) in seen:
            continue
        seen.add((name, extras))
        for line in requires:
            dep = Requirement(line)
            if applies(dep, env, extras):
                queue.append((dep, f"{name} {version}", False))
    return download, reused, problems, with_extras
