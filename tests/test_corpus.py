"""Every real corpus model: optimize (auto portfolio, short budget), checker, ORT outputs bitwise equal,
peak never worse than the input order under the same memory model."""

from __future__ import annotations

import onnx
import pytest

from conftest import CORPUS_ONNX, assert_bitwise_equal, run_ort
from onnx_sched.api import optimize_model

if not CORPUS_ONNX:
    pytest.skip("shared corpus not found", allow_module_level=True)


@pytest.mark.parametrize("path", CORPUS_ONNX, ids=lambda p: p.stem)
def test_corpus_model_optimizes_and_runs_identically(path):
    res = optimize_model(path, objective="peak-mem", method="auto", time_limit=1.0)
    out = res.model
    onnx.checker.check_model(out)
    pk = res.report["peak_bytes"]
    assert pk["lower_bound"] <= pk["output"] <= pk["input"]
    assert out.ir_version == onnx.load(str(path), load_external_data=False).ir_version
    assert_bitwise_equal(run_ort(path), run_ort(out))
