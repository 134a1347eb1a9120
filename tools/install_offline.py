"""`make install-offline WHEELS=DIR`: install the project on a machine with no network, from
a wheelhouse `make wheelhouse` made, reusing this Python's own torch and transformers.

    python3 tools/install_offline.py --wheels DIR [--venv .venv | --target DIR] [--extras runner]

Run it with the Python that holds torch and transformers. It refuses, in one line naming
both versions and both ranges, when either is outside pyproject.toml's runner extra. Then:
--venv (the default, .venv): a venv with --system-site-packages, the project installed
editable with `pip --no-index --find-links DIR`, pip keeping every package the system
already has at a fitting version; --target DIR: the wheelhouse and the project unpacked into
DIR, for PYTHONPATH=DIR. pip reads no configuration file and no PIP_* variable here: only
the wheelhouse is an index. Ends by importing the runner and the app's dependencies.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import sys
from importlib import metadata
from pathlib import Path

import offline_deps as deps

CHECK = ("import torch, transformers, duckdb, textual, platformdirs, gguf, optimum.quanto, "
         "fragility_tui.cli, runners; "
         "print('torch', torch.__version__, 'from', torch.__file__); "
         "print('transformers', transformers.__version__, 'from', transformers.__file__)")


MARK = ".fragility-offline-install"  # in a --target folder this tool filled


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    installed = {}
    for name in deps.REUSED:
        try:
            installed[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            installed[name] = None
    error = deps.range_error(installed, deps.supported_ranges())
    if error:
        print(f"error: {sys.executable}: {error}", file=sys.stderr)
        return 2
    if not args.wheels.is_dir() or not any(args.wheels.glob("*.whl")):
        print(f"error: {args.wheels} holds no wheels: run `make wheelhouse` on a connected "
              f"machine and copy its folder here", file=sys.stderr)
        return 2
    made_for = wheelhouse_python(args.wheels)
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    if made_for and made_for != here:
        print(f"error: {args.wheels} was made for Python {made_for}, {sys.executable} is "
              f"{here}: `make wheelhouse PY={here}`", file=sys.stderr)
        return 2
    try:
        if args.target:
            return into_target(args)
        return into_venv(args)
    except subprocess.CalledProcessError as err:
        print(f"error: {' '.join(map(str, err.cmd[:6]))} ... failed (exit {err.returncode})",
              file=sys.stderr)
        return 1


def wheelhouse_python(folder: Path) -> str | None:
    """The target Python tools/wheelhouse.py wrote into MANIFEST.txt, if it is there."""
    manifest = folder / "MANIFEST.txt"
    if manifest.exists():
        words = manifest.read_text().split(",", 1)[0].split()
        if len(words) >= 2 and words[-2] == "Python":
            return words[-1]
    return None


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--wheels", type=Path, required=True, help="the wheelhouse folder")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--venv", type=Path, default=Path(".venv"),
                       help="a venv with --system-site-packages (default .venv)")
    where.add_argument("--target", type=Path, help="a folder to put on PYTHONPATH instead")
    p.add_argument("--extras", default="runner", help="comma-separated extras (default runner)")
    return p.parse_args(argv)


def offline_env(**extra: str) -> dict[str, str]:
    """No pip.conf, no PIP_INDEX_URL or PIP_FIND_LINKS: the wheelhouse is the only source."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1", **extra}


def pip(python: str, *args: str, env: dict | None = None) -> None:
    cmd = [python, "-m", "pip", *args]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, env=env or offline_env(), cwd=deps.REPO)


def project(extras: str) -> str:
    return f".[{extras}]" if extras else "."


def into_venv(args) -> int:
    """Install into the venv; a venv this call created is removed again when any step
    fails (a half-made venv without the project or its stamp would pass for installed)."""
    venv = args.venv if args.venv.is_absolute() else deps.REPO / args.venv
    python = venv / "bin" / "python"
    cfg = venv / "pyvenv.cfg"
    if cfg.exists() and "include-system-site-packages = true" not in cfg.read_text():
        print(f"error: {venv} exists without --system-site-packages, so it cannot see this "
              f"Python's torch: remove it or pass --venv NEW", file=sys.stderr)
        return 2
    created = not python.exists()
    try:
        if created:
            print(f"+ {sys.executable} -m venv --system-site-packages {venv}", flush=True)
            subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                           check=True)
            link_parent_venv(venv)
        (venv / ".installed").unlink(missing_ok=True)  # stamped again only when all passes
        pip(str(python), "install", "--no-index", "--find-links", str(args.wheels.resolve()),
            "-e", project(args.extras))
        subprocess.run([str(python), "-c", CHECK], check=True, cwd=deps.REPO)
        subprocess.run([str(venv / "bin" / "fragility-tui"), "--help"], check=True,
                       stdout=subprocess.DEVNULL)
    except BaseException:
        if created:
            shutil.rmtree(venv, ignore_errors=True)
            print(f"the install failed: {venv} removed again", file=sys.stderr)
        raise
    # `make install`'s stamp: make run, test and gpu-check then use this venv as it is
    (venv / ".installed").touch()
    print(f"installed into {venv} (torch and transformers from {sys.prefix})")
    return 0


def link_parent_venv(venv: Path) -> Path | None:
    """When this Python is itself a venv (the reference box's python3 is
    /opt/torch/.venv/bin/python3), `--system-site-packages` reaches only the base Python's
    packages, not this venv's torch: a .pth file in the new venv adds this one's
    site-packages after its own."""
    import site

    if sys.prefix == sys.base_prefix:
        return None
    inner = next((venv / "lib").glob("python3*/site-packages"))
    link = inner / "_offline_parent_venv.pth"
    link.write_text("".join(f"{path}\n" for path in site.getsitepackages()))
    print(f"{sys.prefix} is a venv: {link.name} adds its site-packages", flush=True)
    return link


def into_target(args) -> int:
    """Install into a new folder beside the target and swap it in when everything passed:
    a failure leaves the target as it was, and a second install replaces the first whole
    (pip --target into a used folder keeps the old code and only warns)."""
    target = args.target.resolve()
    if target.exists() and any(target.iterdir()) and not (target / MARK).exists():
        print(f"error: {target} is not empty and no install of ours: choose an empty or "
              "new folder", file=sys.stderr)
        return 2
    target.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    wheels = sorted(str(w) for w in args.wheels.resolve().glob("*.whl"))
    try:
        # --target ignores what is installed, so nothing may be resolved there: the
        # wheelhouse is already exactly what this Python lacks (make wheelhouse planned it)
        pip(sys.executable, "install", "--no-index", "--no-deps", "--find-links",
            str(args.wheels.resolve()), "--target", str(building), *wheels, ".")
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            p for p in (str(building), os.environ.get("PYTHONPATH", "")) if p)}
        subprocess.run([sys.executable, "-c", CHECK], check=True, cwd="/", env=env)
        (building / MARK).write_text("installed by tools/install_offline.py --target\n")
        if target.exists():
            old = target.with_name(f".{target.name}-old-{os.getpid()}")
            target.rename(old)
            building.rename(target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            building.rename(target)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    print(f"installed into {target}: run with PYTHONPATH={target} "
          f"({target}/bin/fragility-tui, or python -m fragility_tui.cli)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
