"""Issue 42, part 4: chapter 9's table on the cuda device (``compile/capstone_cuda.py``) and
what the book shows without a GPU. On the simulator: launches and bytes are exact, times
are not, so nothing here asserts a time."""

from __future__ import annotations

import json

import pytest

from minitorch.compile import capstone_cuda as cc


@pytest.fixture(scope="module")
def cnn_record():
    name = "capstone CNN"
    spec = cc._models(quick=True)[name]
    machine, simulated = cc.machine()
    r = cc.row(name, *spec, pairs=1, warm=1)
    return {"machine": machine, "simulator": simulated, "date": "2026-12-05 04:00 UTC",
            "mode": "default", "quick": True, "torch": None, "rows": [r]}  # fmt: skip


def test_cnn_row_on_cuda(cnn_record):
    (r,) = cnn_record["rows"]
    assert cnn_record["simulator"]  # no GPU on CI: the record says so
    assert r["losses_agree"]
    assert r["compiled_launches"] < r["eager_launches"]
    assert 0 < r["compiled_peak_bytes"] <= r["eager_peak_bytes"]
    assert r["eager_ms"] > 0 and r["compiled_ms"] > 0 and r["first_call_s"] > 0
    assert r["torch_ms"] is None  # the quick sizes have no PyTorch twin
    text = cc.table_text(cnn_record)
    assert f"{r['eager_launches']}/{r['compiled_launches']}" in text
    assert text.splitlines()[0].startswith("Numba CUDA simulator (no GPU), 2026-12-05")


def test_cli_writes_the_record(cnn_record, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cc, "gpu_table", lambda quick, mode: cnn_record)
    path = tmp_path / "data" / "ch9_gpu.json"
    cc.main(["--quick", "--json", str(path)])
    assert json.loads(path.read_text()) == cnn_record
    assert "capstone CNN" in capsys.readouterr().out


def test_book_shows_only_a_recorded_gpu_run(cnn_record, tmp_path):
    path = tmp_path / "ch9_gpu.json"
    none = cc.book_text(path)
    assert none.startswith("No GPU run has been recorded yet") and "--json" in none
    path.write_text(json.dumps(cnn_record))  # a simulator run is not a GPU run
    assert cc.book_text(path) == none
    gpu = dict(cnn_record, machine="NVIDIA H200", simulator=False)
    path.write_text(json.dumps(gpu))
    text = cc.book_text(path)
    assert "last recorded GPU run (NVIDIA H200, 2026-12-05 04:00 UTC)" in text
    assert "ran without a GPU" in text and "capstone CNN" in text
    assert max(len(line) for line in (text + "\n" + none).splitlines()) <= 100  # the page


def test_the_book_has_no_gpu_record_unless_one_was_run():
    # figures in the book come from a run: a record there must be a GPU's, never a simulator's
    if cc.BOOK_RECORD.exists():
        record = json.loads(cc.BOOK_RECORD.read_text())
        assert record["simulator"] is False and record["rows"]
    else:
        assert cc.book_text().startswith("No GPU run has been recorded yet")


def test_rows_of_both_chapters_are_registered():
    # chapter 11 adds TinyGPT's row (chapter 9 imports no later chapter)
    assert list(cc.GPU_ROWS) == ["capstone CNN", "TinyGPT"]
    make_model, make_step, batch, twin = cc.GPU_ROWS["TinyGPT"](True)
    assert make_model().vocab == 7 and [b.shape[0] for b in batch[:1]] == [2] and twin is None


def test_the_cli_module_is_not_imported_by_the_package():
    # `python -m minitorch.compile.capstone_cuda` runs it as __main__: were it imported with
    # minitorch already, its rows registry would be a second, empty one (and runpy warns)
    import subprocess
    import sys

    code = "import sys, minitorch; print('minitorch.compile.capstone_cuda' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
