"""The machine a bench ran on, as the first line of every bench script's output: the CPU model, which of its
matrix-unit flags are present, torch's version and thread count. A figure copied from a bench's output carries the
machine it was measured on (README and docs/speed.md quote it).

    from bench.machine import machine_line
    print(machine_line())   # machine: Intel(R) Xeon(R) ...; matrix units: amx_bf16, avx512_bf16, ...; torch 2.x, 2 threads
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

MATRIX_FLAGS = ("amx_bf16", "avx512_bf16", "avx512f", "avx2")  # the units bfloat16 and float32 matmuls run on
CPUINFO = Path("/proc/cpuinfo")


def cpu_model(cpuinfo: str) -> str:
    """The first `model name` (x86) or `Model name` (lscpu's output) of `cpuinfo`'s text; "unknown CPU" if none."""
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == "model name" and value.strip():
            return value.strip()
    return "unknown CPU"


def matrix_flags(cpuinfo: str) -> list[str]:
    """The MATRIX_FLAGS among the first `flags` (or lscpu's `Flags`) line of `cpuinfo`'s text, in MATRIX_FLAGS'
    order."""
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == "flags":
            present = set(value.split())
            return [f for f in MATRIX_FLAGS if f in present]
    return []


def cpu_text() -> str:
    """/proc/cpuinfo where the system has one, else lscpu's output, else ""."""
    if CPUINFO.is_file():
        return CPUINFO.read_text(errors="replace")
    try:
        return subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return ""


def describe(cpuinfo: str, torch_version: str, threads: int, cpus: int | None) -> str:
    """The header line from its parts."""
    flags = ", ".join(matrix_flags(cpuinfo)) or f"none (of {', '.join(MATRIX_FLAGS)})"
    return (f"machine: {cpu_model(cpuinfo)}, {cpus} CPUs; matrix units: {flags}; torch {torch_version}, "
            f"{threads} threads")


def machine_line() -> str:
    """The header line of this process: its CPU, matrix units, torch version and torch's thread count now."""
    import torch  # noqa: PLC0415 - a bench imports torch anyway; importing this module stays cheap

    return describe(cpu_text(), torch.__version__, torch.get_num_threads(), os.cpu_count())
