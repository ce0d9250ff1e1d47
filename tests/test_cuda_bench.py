"""``python -m minitorch.cuda.bench --quick`` runs every row of issue 42's table on the simulator,
each row's first result checked against numpy (or the CPU) inside the bench, so it cannot rot.
No timing is asserted: simulated times mean nothing."""

from __future__ import annotations

import json

import pytest

import minitorch as mt
from minitorch.cuda import bench

ROWS = [
    "add, 1000 float32",
    "relu(x*2+1)*y, eager",
    "relu(x*2+1)*y, compiled max-autotune",
    "sum of all 1000",
    "sum axis 1 of 24x24",
    "sum axis 0 of 24x24",
    "matmul 12x12 float32",
    "softmax 6x8",
    "layer norm 6x8",
    "softmax 6x40",
    "layer norm 6x40",
    "MLP 12-16-10, batch 8, forward+backward",
    "host to device copy",
    "device to host copy",
    "CNN training step (batch 4), eager",
    "CNN training step (batch 4), compiled max-autotune",
    "TinyGPT training step (width 8, batch 2x4), eager",
    "TinyGPT training step (width 8, batch 2x4), compiled max-autotune",
]


def test_quick_bench_prints_and_records_every_row(tmp_path, capsys):
    path = tmp_path / "bench.json"
    assert bench.main(["--quick", "--repeat", "1", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Numba CUDA simulator" in out and all(name in out for name in ROWS)
    record = json.loads(path.read_text())
    assert record["machine"]["simulator"] and record["date"] and record["quick"]
    assert [r["case"] for r in record["rows"]] == ROWS
    assert all(r["minitorch_us"] > 0 and r["torch_us"] is None for r in record["rows"])
    counted = {r["case"]: r["launches"] for r in record["rows"] if r["launches"] is not None}
    assert counted["relu(x*2+1)*y, compiled max-autotune"] >= 1
    assert all(n > 0 for n in counted.values())


def test_a_wrong_result_fails_its_row(monkeypatch):
    monkeypatch.setattr(mt.Tensor, "__add__", mt.Tensor.__sub__)
    with pytest.raises(AssertionError, match="bench row 'add, 1000 float32': wrong result"):
        bench.run(quick=True, repeat=1, only="add,")


def test_launch_counter_sees_only_cuda_launches():
    x = mt.tensor([1.0, 2.0], device="cuda")
    assert bench.count_launches(lambda: x + x) == 1
    assert bench.count_launches(lambda: mt.tensor([1.0]) + 1) == 0
