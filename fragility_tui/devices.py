"""The machine's devices as the app and the CLI show them: the CPU and every visible GPU
with its name, memory used/total and utilisation. Pure and torch-free (the app never loads
torch): GPUs come from NVML (`nvidia-ml-py`, imported as `pynvml`) when it is installed,
else from one `nvidia-smi --query-gpu` call; the CPU from /proc. A query costs a few
milliseconds (NVML) or one short process (nvidia-smi), so a watcher can repeat it every few
seconds in a worker thread.

Device names as `run --device` takes them: `cpu`, `cuda:N`, `any` (any free GPU), `auto`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

NVIDIA_SMI_QUERY = ["--query-gpu=index,name,memory.used,memory.total,utilization.gpu",
                    "--format=csv,noheader,nounits"]
NVIDIA_SMI_TIMEOUT_S = 5.0
ANY_GPU = "any"  # run --device any: the first GPU whose slot is free
DEVICE_CHOICES_HELP = "auto, cpu, cuda:N or any (any free GPU)"


class DeviceQueryError(ValueError):
    """GPU information that could not be read: the message says which source and line."""


@dataclass(frozen=True)
class Device:
    """One device. Memory in MiB; utilisation in percent (None where the source gave none:
    nvidia-smi prints `[N/A]` on some boards)."""

    name: str  # cpu | cuda:N
    label: str  # the product name (GPU) or the CPU model
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    utilization_pct: float | None = None

    def short(self) -> str:
        """Name and memory, narrow enough for a form field: `cuda:0 12.3/140 GiB`."""
        if not self.memory_total_mib:
            return self.name
        return (f"{self.name} {(self.memory_used_mib or 0) / 1024:.1f}/"
                f"{self.memory_total_mib / 1024:.0f} GiB")

    def summary(self) -> str:
        """One short line: `cuda:0 NVIDIA H200 12.3/139.8 GiB 45%`."""
        parts = [self.name, self.label]
        if self.memory_total_mib:
            parts.append(f"{(self.memory_used_mib or 0) / 1024:.1f}/"
                         f"{self.memory_total_mib / 1024:.1f} GiB")
        if self.utilization_pct is not None:
            parts.append(f"{self.utilization_pct:.0f}%")
        return " ".join(parts)


@dataclass(frozen=True)
class DeviceReport:
    """The CPU and the GPUs seen; `gpu_note` says why there are none or what went wrong
    (an unreadable nvidia-smi output is a note, never an exception: the app keeps going)."""

    cpu: Device
    gpus: tuple[Device, ...]
    gpu_note: str | None = None

    @property
    def devices(self) -> tuple[Device, ...]:
        return (self.cpu, *self.gpus)


def _number(text: str, what: str, line_no: int, line: str) -> float | None:
    text = text.strip()
    if text.startswith("[") or text in ("", "N/A"):  # [N/A], [Not Supported]
        return None
    try:
        return float(text)
    except ValueError:
        raise DeviceQueryError(f"nvidia-smi output line {line_no}: {what} is {text!r}, not a "
                               f"number: {line!r}") from None


def parse_nvidia_smi(text: str) -> list[Device]:
    """The GPUs of `nvidia-smi --query-gpu=index,name,memory.used,memory.total,
    utilization.gpu --format=csv,noheader,nounits` output, one line per GPU; a line that is
    not that shape raises DeviceQueryError naming it."""
    gpus = []
    for line_no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 5:
            raise DeviceQueryError(f"nvidia-smi output line {line_no}: expected 5 fields "
                                   f"(index, name, memory.used, memory.total, "
                                   f"utilization.gpu), got {len(fields)}: {line!r}")
        # A product name may hold a comma; the numbers are the last three fields.
        index, name = fields[0], ", ".join(fields[1:-3])
        if not index.isdigit():
            raise DeviceQueryError(f"nvidia-smi output line {line_no}: index is {index!r}, "
                                   f"not a number: {line!r}")
        gpus.append(Device(f"cuda:{int(index)}", name,
                           _number(fields[-3], "memory.used", line_no, line),
                           _number(fields[-2], "memory.total", line_no, line),
                           _number(fields[-1], "utilization.gpu", line_no, line)))
    return gpus


def _gpus_from_nvml() -> list[Device] | None:
    """GPUs through NVML, or None when nvidia-ml-py is not installed or NVML will not start."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # no driver: let nvidia-smi (or the note) say so
        return None
    try:
        gpus = []
        for k in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(k)
            name = pynvml.nvmlDeviceGetName(handle)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            try:
                util = float(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)
            except Exception:
                util = None
            gpus.append(Device(f"cuda:{k}", name.decode() if isinstance(name, bytes) else name,
                               memory.used / 2**20, memory.total / 2**20, util))
        return gpus
    finally:
        pynvml.nvmlShutdown()


def query_gpus() -> tuple[list[Device], str | None]:
    """(GPUs, note): NVML when installed, else nvidia-smi; no GPU tooling is a note."""
    gpus = _gpus_from_nvml()
    if gpus is not None:
        return gpus, None if gpus else "NVML reports no GPU"
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return [], "no GPU info (no nvidia-smi on PATH, nvidia-ml-py not installed)"
    try:
        out = subprocess.run([exe, *NVIDIA_SMI_QUERY], capture_output=True, text=True,
                             timeout=NVIDIA_SMI_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [], f"no GPU info: nvidia-smi did not answer ({exc})"
    if out.returncode != 0:
        reason = (out.stderr or out.stdout).strip().splitlines()
        return [], (f"no GPU info: nvidia-smi exited {out.returncode}"
                    + (f": {reason[-1]}" if reason else ""))
    try:
        gpus = parse_nvidia_smi(out.stdout)
    except DeviceQueryError as exc:
        return [], f"no GPU info: {exc}"
    return gpus, None if gpus else "nvidia-smi lists no GPU"


def cpu_device() -> Device:
    """The CPU: its model name, memory used/total (/proc/meminfo) and load as a percentage
    of its cores (1-minute load average: one reading, no sampling interval to wait for)."""
    label = f"{os.cpu_count() or 1} cores"
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("model name"):
                    label = f"{line.split(':', 1)[1].strip()} ({label})"
                    break
    except OSError:
        pass
    used = total = None
    try:
        info = {}
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                info[key] = float(value.split()[0]) / 1024  # kB -> MiB
        total = info["MemTotal"]
        used = total - info.get("MemAvailable", info.get("MemFree", 0.0))
    except (OSError, KeyError, ValueError, IndexError):
        pass
    try:
        load = min(100.0, 100.0 * os.getloadavg()[0] / (os.cpu_count() or 1))
    except OSError:
        load = None
    return Device("cpu", label, used, total, load)


def query_devices() -> DeviceReport:
    gpus, note = query_gpus()
    return DeviceReport(cpu_device(), tuple(gpus), note)


def normalise_device(text: str) -> str:
    """`run --device` text as recorded: auto, cpu, any or cuda:N (`cuda` is cuda:0, as
    torch reads it); anything else raises ValueError with the accepted forms."""
    value = text.strip().lower()
    if value in ("auto", "cpu", ANY_GPU):
        return value
    if value == "cuda":
        return "cuda:0"
    if value.startswith("cuda:") and value[5:].isdigit():
        return f"cuda:{int(value[5:])}"
    raise ValueError(f"unknown device {text!r}; use {DEVICE_CHOICES_HELP}")
