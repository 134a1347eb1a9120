"""`make wheelhouse`: on a connected machine, download the wheels an offline target needs
beyond what it already has, for its Python and platform.

    python3 tools/wheelhouse.py --out DIR [--python 3.12] [--platform manylinux_2_28_x86_64]
                                [--freeze FILE] [--extras runner] [--also REQUIREMENT ...]

The target's packages come from FILE (its `pip list --format=freeze`, not `pip freeze`,
which writes `name @ URL` without a version; default tools/reference-box.txt, the
reference air-gapped box). pip resolves the project for the target with those packages
pinned (metadata only: no torch wheel is fetched); the wheelhouse is what that resolution
reaches from the project without passing through a package the target already has at a
fitting version. torch and transformers are never carried: the target's must lie inside the
runner extra's ranges. `--also` carries another requirement with what it needs (the GPU
job that runs lm-evaluation-harness: `--also lm_eval==0.4.13`). A dependency published only
as a source archive is built here into a wheel when it is pure Python (`py3-none-any`: it
installs anywhere); one with compiled code is an error naming it. Prints each wheel, the
wheelhouse's size and the tree's.
"""

from __future__ import annotations

import argparse
import json
import os
import platform as host
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import offline_deps as deps

CAP_MIB = 64  # what a job may copy onto the air-gapped box, the project's tree included


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        return build(args)
    except (ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def parse_args(argv):
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="the wheelhouse folder")
    p.add_argument("--python", default=here, help=f"target Python, e.g. 3.12 (default {here})")
    p.add_argument("--platform", default=None,
                   help="target wheel platform, e.g. manylinux_2_28_x86_64 (default: this machine's)")
    p.add_argument("--freeze", type=Path, default=deps.REFERENCE_BOX,
                   help="the target's package list, written there with `pip list "
                        "--format=freeze` (default: tools/reference-box.txt)")
    p.add_argument("--extras", default="runner", help="comma-separated extras (default runner)")
    p.add_argument("--also", action="append", default=[], metavar="REQUIREMENT",
                   help="another requirement to carry with its dependencies, e.g. "
                        "lm_eval==0.4.13 (repeatable)")
    p.add_argument("--without-project", action="store_true",
                   help="carry only the --also requirements, not the project (a job of their "
                        "own)")
    p.add_argument("--dry-run", action="store_true", help="print the plan, download nothing")
    args = p.parse_args(argv)
    if args.without_project and not args.also:
        p.error("--without-project needs --also")
    return args


def this_platform() -> str:
    """The newest manylinux tag this machine's glibc accepts (pip still takes older ones)."""
    if sys.platform != "linux":
        raise ValueError("give --platform: only Linux targets are derived from this machine")
    libc, version = host.libc_ver()
    if libc != "glibc":
        raise ValueError(f"give --platform: this machine's libc is {libc or 'unknown'}")
    major, minor = version.split(".")[:2]
    return f"manylinux_{major}_{minor}_{host.machine()}"


def pip(*args: str, quiet: bool = True) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    return subprocess.run(cmd, capture_output=quiet, text=True)


def platform_tags(platform: str) -> list[str]:
    """pip takes exactly the tags it is given for another machine: a manylinux_2_28 box also
    runs manylinux_2_17 .. 2_27, manylinux2014, 2010 and 1 wheels (PEP 600)."""
    m = re.fullmatch(r"manylinux_2_(\d+)_(\w+)", platform)
    if not m:
        return [platform]
    glibc, arch = int(m.group(1)), m.group(2)
    tags = [f"manylinux_2_{minor}_{arch}" for minor in range(glibc, 4, -1)]
    legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
    return tags + [f"{name}_{arch}" for minor, name in legacy.items() if minor <= glibc]


def target_flags(python: str, platform: str) -> list[str]:
    digits = python.replace(".", "")
    flags = ["--only-binary=:all:", "--python-version", python, "--implementation", "cp",
             "--abi", f"cp{digits}", "--abi", "abi3", "--abi", "none"]
    for tag in platform_tags(platform):
        flags += ["--platform", tag]
    return flags


def missing_wheel(stderr: str) -> str | None:
    """The requirement pip found no wheel for, from its resolution failure."""
    marker = "No matching distribution found for "
    for line in stderr.splitlines():
        if marker in line:
            return line.split(marker, 1)[1].strip()
    return None


def no_wheel_error(stderr: str, python: str, platform: str) -> str:
    """pip's resolution failure, cut to the requirement it names."""
    req = missing_wheel(stderr)
    if req:
        return (f"no wheel of {req} for Python {python} on {platform} (source-only or "
                f"no such release): it cannot be installed offline; pin another version "
                f"or drop the extra that needs it")
    tail = "\n".join(stderr.strip().splitlines()[-8:])
    return f"pip could not resolve the project for Python {python} on {platform}:\n{tail}"


# pip run on nothing but the standard library, the target's packages (as empty records) and
# pip itself: what it then plans to install is what the target lacks. Only a dry run may take
# another platform's tags without --target, and --target would ignore installed packages.
BOOT = ("import runpy, sys; sys.path[:0] = sys.argv[1:3]; sys.argv = ['pip'] + sys.argv[3:]; "
        "runpy.run_module('pip', run_name='__main__', alter_sys=True)")
PIP_FOR_RESOLVING = "pip>=25"  # 23.2 refuses --platform in a dry run without --target


def pip_wheel(folder: Path) -> Path:
    proc = pip("download", "--no-deps", "--only-binary=:all:", "--quiet", "-d", str(folder),
               PIP_FOR_RESOLVING)
    wheels = sorted(folder.glob("pip-*.whl"))
    if proc.returncode != 0 or not wheels:
        raise ValueError(f"could not download {PIP_FOR_RESOLVING} to resolve with:\n{proc.stderr}")
    return wheels[-1]


def stub_site(folder: Path, present: dict[str, str]) -> Path:
    """One empty dist-info per target package: pip counts it installed and, with no
    Requires-Dist, asks nothing about what it depends on (the target has that too)."""
    for name, version in present.items():
        info = folder / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return folder


class NoWheel(ValueError):
    def __init__(self, message: str, requirement: str | None):
        super().__init__(message)
        self.requirement = requirement


def build_pure_wheel(req: str, local: Path) -> bool:
    """Build `req` (published as source only) into a wheel in `local`: True when it came
    out pure Python (py3-none-any, good for any target), else the wheel is dropped."""
    before = set(local.glob("*.whl"))
    if pip("wheel", "--no-deps", "--quiet", "-w", str(local), req).returncode != 0:
        return False
    pure = True
    for wheel in set(local.glob("*.whl")) - before:
        if not wheel.name.endswith(("-py3-none-any.whl", "-py2.py3-none-any.whl")):
            wheel.unlink()
            pure = False
    return pure and set(local.glob("*.whl")) != before


def resolve(roots, build, present, python, platform, with_extras: set[str] = frozenset(),
            local: Path | None = None) -> dict[str, tuple[str, list[str]]]:
    """pip's plan for the target: what it would install there beside what it has.
    `with_extras` are resolved at the target's version rather than taken as installed;
    `local`: a folder of wheels built here (pure Python) that pip may take too. A missing
    wheel raises NoWheel."""
    unknown = sorted(name for name, version in present.items() if version is None)
    if unknown:
        raise ValueError(f"the target's freeze gives no version for {', '.join(unknown)}: "
                         f"write it with `pip list --format=freeze` on the target")
    carried = {deps.canonical(r.name) for r in build} | set(with_extras)
    with tempfile.TemporaryDirectory() as tmp:
        site = stub_site(Path(tmp, "site"), {n: v for n, v in present.items() if n not in carried})
        pins = Path(tmp, "pins.txt")
        pins.write_text("".join(f"{n}=={deps.public_version(present[n])}\n"
                                for n in sorted(with_extras)))
        report = Path(tmp, "report.json")
        cmd = [sys.executable, "-I", "-S", "-c", BOOT, str(site), str(pip_wheel(Path(tmp))),
               "install", "--dry-run", "--quiet", "--disable-pip-version-check", "--report",
               str(report), *target_flags(python, platform), "-c", str(pins),
               *(["--find-links", str(local)] if local else []),
               *map(str, roots), *map(str, build)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise NoWheel(no_wheel_error(proc.stderr, python, platform),
                          missing_wheel(proc.stderr))
        items = json.loads(report.read_text())["install"]
    return {deps.canonical(i["metadata"]["name"]):
            (i["metadata"]["version"], i["metadata"].get("requires_dist") or [])
            for i in items}


SKIPPED = {".git", ".venv", "build", "dist", "__pycache__", ".pytest_cache", ".hypothesis"}


def tree_bytes() -> int:
    """The project's tracked files (what travels with the wheelhouse); outside a git
    checkout, every file but venvs, build outputs and caches."""
    proc = subprocess.run(["git", "ls-files", "-z"], cwd=deps.REPO, capture_output=True,
                          text=True)
    if proc.returncode == 0:
        files = [deps.REPO / f for f in proc.stdout.split("\0") if f]
    else:
        files = []
        for folder, dirs, names in os.walk(deps.REPO):
            dirs[:] = [d for d in dirs if d not in SKIPPED and not d.endswith(".egg-info")
                       and not d.startswith(".venv")]
            files += [Path(folder, n) for n in names]
    return sum(f.stat().st_size for f in files if f.is_file())


def mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def build(args) -> int:
    platform = args.platform or this_platform()
    extras = [e for e in args.extras.split(",") if e]
    present = deps.parse_freeze(args.freeze.read_text())
    env = deps.target_environment(args.python, platform)
    error = deps.range_error(present, deps.supported_ranges())
    if error:
        raise ValueError(f"the target (--freeze {args.freeze}): {error}")
    try:
        also = [deps.Requirement(text) for text in args.also]
    except deps.InvalidRequirement as err:
        raise ValueError(f"--also: {err}") from None
    project = [] if args.without_project else deps.project_requirements(extras)
    roots = [r for r in project + also if deps.applies(r, env)]
    build_reqs = [] if args.without_project else deps.build_requirements()
    print(f"target: Python {args.python}, {platform}; has {len(present)} packages "
          f"({args.freeze}); extras: {','.join(extras) or 'none'}"
          + (f"; also {', '.join(args.also)}" if args.also else "")
          + ("; without the project" if args.without_project else ""))
    local = Path(tempfile.mkdtemp(prefix="wheelhouse-built-"))
    try:
        return _build(args, platform, extras, present, env, roots, build_reqs, local)
    finally:
        shutil.rmtree(local, ignore_errors=True)


def _resolve_building(roots, build_reqs, present, python, platform, with_extras, local):
    """resolve(), building each source-only pure-Python dependency it stops at."""
    built: set[str] = set()
    while True:
        try:
            return resolve(roots, build_reqs, present, python, platform, with_extras, local)
        except NoWheel as err:
            req = (err.requirement or "").split(" (from ", 1)[0]
            if not req or req in built or not build_pure_wheel(req, local):
                raise
            print(f"built here (source only, pure Python): {req}")
            built.add(req)


def _build(args, platform, extras, present, env, roots, build_reqs, local) -> int:
    with_extras: set[str] = set()
    while True:  # again while a package the target has turns out to be wanted with extras
        resolved = _resolve_building(roots, build_reqs, present, args.python, platform,
                                     with_extras, local)
        download, reused, problems, wanted = deps.plan_downloads(roots, present, resolved, env,
                                                                 build_reqs)
        if wanted <= with_extras:
            break
        with_extras |= wanted
    if problems:
        raise ValueError("the target cannot take this project:\n  " + "\n  ".join(problems))
    print("reused from the target: " + ", ".join(
        f"{n} {v or '(any)'}" for n, v in sorted(reused.items())))
    if args.dry_run:
        for name, version in sorted(download.items()):
            print(f"  would download {name}=={version}")
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    for stale in args.out.glob("*.whl"):
        stale.unlink()
    pins = [f"{name}=={version}" for name, version in sorted(download.items())]
    proc = pip("download", "--no-deps", "--quiet", "-d", str(args.out),
               *target_flags(args.python, platform), "--find-links", str(local), *pins)
    if proc.returncode != 0:
        raise ValueError(no_wheel_error(proc.stderr, args.python, platform))
    wheels = sorted(args.out.glob("*.whl"))
    missing = set(download) - {deps.canonical(w.name.split("-")[0]) for w in wheels}
    if missing:
        raise ValueError(f"pip downloaded no wheel for {', '.join(sorted(missing))}")
    (args.out / "MANIFEST.txt").write_text(
        f"# make wheelhouse: Python {args.python}, {platform}, extras {','.join(extras)}, "
        f"target {args.freeze.name}" + "".join(f", also {a}" for a in args.also) + "\n"
        + "".join(f"# reused: {n} {v or '(any)'}\n" for n, v in sorted(reused.items()))
        + "".join(f"{p}\n" for p in pins))
    total = sum(w.stat().st_size for w in wheels)
    for w in wheels:
        print(f"  {w.stat().st_size / 2**20:7.2f} MiB  {w.name}")
    tree = tree_bytes()
    print(f"wheelhouse: {len(wheels)} wheels, {mib(total)} in {args.out}")
    print(f"with the project's tree ({mib(tree)}): {mib(total + tree)} "
          f"(a job may copy in {CAP_MIB} MiB)")
    if total + tree > CAP_MIB * 2**20:
        print(f"error: over the {CAP_MIB} MiB a job may copy in", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUTF8", "1")
    sys.exit(main())
