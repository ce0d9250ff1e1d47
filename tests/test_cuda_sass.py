"""minitorch/cuda/sass.py: reading ptxas's report and cuobjdump's listing (on canned text, as
CI has no CUDA toolkit), and, where the toolkit is installed, the tuned matmul's machine code."""

from __future__ import annotations

import pytest

from minitorch.cuda import gemm, lowering, sass

PTXAS = """ptxas info    : 11 bytes gmem
ptxas info    : Compiling entry function '_Z6kernel' for 'sm_90'
ptxas info    : Function properties for _Z6kernel
    64 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 94 registers, used 1 barriers, 8256 bytes smem, 464 bytes cmem[0]
"""


def _sass(lines):
    """``cuobjdump -sass``'s layout: an address comment, the instruction, its encoding."""
    out = ["\tFunction : _Z6kernel", '\t.headerflags\t@"EF_CUDA_SM90"']
    for at, ins in lines:
        out.append(f"        /*{at:04x}*/                   {ins} ;      /* 0x000000000000 */")
        out.append("                                                 /* 0x000fe40000000000 */")
    return "\n".join(out)


# an outer loop (0x10-0x80) around an inner one (0x20-0x50), and a forward branch
LISTING = _sass([
    (0x00, "LDC R1, c[0x0][0x28]"),
    (0x10, "IMAD.WIDE.U32 R2, R0, 0x4, R4"),
    (0x20, "LDG.E R6, desc[UR4][R2.64]"),
    (0x30, "FFMA R7, R6, R6, R7"),
    (0x40, "IADD3 R2, P1, R2, 0x80, RZ"),
    (0x50, "@P0 BRA 0x20"),
    (0x60, "SHFL.DOWN PT, R8, R7, 0x10, 0x1f"),
    (0x70, "@!P2 BRA 0xa0"),
    (0x80, "@!P1 BRA 0x10"),
    (0x90, "STG.E desc[UR4][R2.64], R7"),
    (0xa0, "EXIT"),
])  # fmt: skip


def test_ptxas_report_is_read():
    assert sass.parse_ptxas(PTXAS) == dict(registers=94, spilled=20, shared=8256)
    assert sass.parse_ptxas("ptxas info : Used 8 registers") == dict(registers=8, spilled=0,
                                                                      shared=0)  # fmt: skip


def test_listing_and_kinds():
    ins = sass.parse_sass(LISTING)
    assert [a for a, _ in ins] == list(range(0, 0xB0, 0x10))
    assert ins[5] == (0x50, "@P0 BRA 0x20")
    assert [sass.opcode(i) for _, i in ins[:3]] == ["LDC", "IMAD", "LDG"]
    assert sass.opcode("@!UP1 FFMA.FTZ R1, R2, R3, R4") == "FFMA"
    ops = ("FFMA", "MUFU", "DADD", "HFMA2", "LDG", "STS", "LDL", "ATOMS", "LDC", "ULDC", "SHFL",
           "BAR", "IMAD", "FLO")  # fmt: skip
    kinds = {op: sass.kind(op) for op in ops}
    assert kinds == dict(FFMA="math", MUFU="math", DADD="math", HFMA2="math", LDG="memory",
                         STS="memory", LDL="memory", ATOMS="memory", LDC="rest", ULDC="rest",
                         SHFL="sync", BAR="sync", IMAD="rest", FLO="rest")  # fmt: skip


def test_only_innermost_loops_are_summarised():
    loops = sass.inner_loops(sass.parse_sass(LISTING))
    assert loops == [dict(memory=1, math=1, rest=2)]  # 0x20-0x50; the outer loop holds it
    found = sass.summary(dict(registers=1, spilled=0, shared=0), sass.parse_sass(LISTING))
    assert found["instructions"] == 11 and found["loops"] == [dict(memory=1, math=1, rest=2)]
    text = sass.line(found)
    assert text.endswith("loops: 4 (1 math, 1 memory, 0 sync, 2 rest)"), text


def test_missing_tools_are_named(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(sass.site, "getsitepackages", lambda: [str(tmp_path)])
    monkeypatch.setattr(sass.site, "getusersitepackages", lambda: str(tmp_path))
    assert sass.find_tools() is None
    bin_dir = tmp_path / "nvidia" / "cu13" / "bin"  # NVIDIA's wheels' layout
    bin_dir.mkdir(parents=True)
    for tool in sass.TOOLS:
        (bin_dir / tool).write_text("#!/bin/sh\n")
        (bin_dir / tool).chmod(0o755)
    assert sass.find_tools() == {t: str(bin_dir / t) for t in sass.TOOLS}


@pytest.mark.skipif(sass.find_tools() is None, reason="no CUDA toolkit: " + sass.INSTALL)
def test_tuned_matmul_machine_code():
    """Two 256-thread blocks fit a multiprocessor's 65536 registers, nothing spills, and the
    inner loop is mostly multiply-adds and shared loads, not index arithmetic."""
    found = lowering.report(sass="9.0", only="gemm (")["gemm (register-blocked matmul)"]["float32"]
    assert found["registers"] <= 128 and found["spilled"] == 0, found
    (loop,) = found["loops"]  # the k loop over the shared tiles
    assert loop["math"] >= 2 * loop["rest"] and loop["memory"] >= 16, found
    t = gemm.GPU_TILES
    assert (t.bm // t.tm) * (t.bn // t.tn) == 256
