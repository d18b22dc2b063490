"""Every bench script's header names its machine (bench/machine.py): the CPU model and matrix-unit flags read from
/proc/cpuinfo's text, torch's version and threads."""

from __future__ import annotations

import importlib.util

from sources import REPO

SPEC = importlib.util.spec_from_file_location("bench_machine", REPO / "bench" / "machine.py")
machine = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(machine)

CPUINFO = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu vme sse2 avx avx2 avx512f avx512bw avx512_bf16 amx_tile amx_int8
bugs\t\t: spectre_v1

processor\t: 1
model name\t: a second core, never read
flags\t\t: fpu amx_bf16
"""

LSCPU = """Architecture:                         x86_64
Model name:                           AMD EPYC 7B13
Flags:                                fpu sse2 avx avx2 fma
"""


def test_the_first_cores_model_and_its_matrix_flags_are_read_in_a_fixed_order():
    assert machine.cpu_model(CPUINFO) == "Intel(R) Xeon(R) Platinum 8480+"
    assert machine.matrix_flags(CPUINFO) == ["avx512_bf16", "avx512f", "avx2"]  # amx_tile is no amx_bf16


def test_lscpu_output_reads_the_same_way():
    assert machine.cpu_model(LSCPU) == "AMD EPYC 7B13"
    assert machine.matrix_flags(LSCPU) == ["avx2"]


def test_the_header_says_none_and_unknown_where_nothing_is_found():
    line = machine.describe("processor\t: 0\nflags\t\t: fpu sse2\n", "2.13.0+cpu", 2, 4)
    assert line == ("machine: unknown CPU, 4 CPUs; matrix units: none (of amx_bf16, avx512_bf16, avx512f, avx2); "
                    "torch 2.13.0+cpu, 2 threads")
    assert "matrix units: avx2; torch" in machine.describe(LSCPU, "2.13.0+cpu", 2, 4)


def test_this_process_header_names_torch_and_its_threads():
    import torch

    line = machine.machine_line()
    assert f"torch {torch.__version__}, {torch.get_num_threads()} threads" in line
