"""A model as torch's default exporter writes it, through every objective of the real command.

Since torch 2.9 a plain ``torch.onnx.export`` runs the ``torch.export`` (dynamo) exporter, whose files differ from
the TorchScript exporter's the other tests' torch models come from: opset 20 (``LayerNormalization``, ``Gelu``,
``Trilu`` from ``scaled_dot_product_attention``), dims named by ``torch.export.Dim``, torch's metadata on every node
and the weights in a ``.data`` file beside the model.  ``data/dynamo_decoder.onnx`` is such a file, a two-block
GPT-style decoder exported with the defaults (``python benchmarks/model_kinds.py tests/data/dynamo_decoder.onnx``,
torch 2.13 + onnxscript 0.7.2), committed so that the test reads the same file whatever exporter versions are
installed (onnxscript arrives in CI only through olive-ai).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

DATA = Path(__file__).parent / "data"
EXAMPLES = Path(__file__).parents[1] / "examples"
OBJECTIVES = {
    "peak-mem": [],
    "makespan": ["--machines", str(EXAMPLES / "machines_cpu_igpu_dgpu.json")],
    "latency": ["--profiles", str(EXAMPLES / "profiles_cpu_igpu_dgpu.json")],
    "peak-mem-devices": ["--devices", "CPU,GPU"],
}
TORCH_KEYS = {"pkg.torch.onnx.stack_trace", "pkg.torch.onnx.name_scopes"}


def _run(path: Path) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return session.run(None, {"ids": np.random.default_rng(0).integers(0, 40, (2, 10))})


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture and its data file, copied so nothing can write beside the committed ones."""
    folder = tmp_path_factory.mktemp("dynamo")
    for name in ("dynamo_decoder.onnx", "dynamo_decoder.onnx.data"):
        shutil.copy(DATA / name, folder / name)
    return folder / "dynamo_decoder.onnx"


def test_the_fixture_is_what_the_dynamo_exporter_writes(model):
    m = onnx.load(str(model), load_external_data=False)
    assert m.opset_import[0].version >= 18
    assert {"LayerNormalization", "Gelu", "Trilu"} <= {n.op_type for n in m.graph.node}
    assert [d.dim_param for d in m.graph.input[0].type.tensor_type.shape.dim] == ["b", "s"]
    traced = [n for n in m.graph.node if TORCH_KEYS <= {p.key for p in n.metadata_props}]
    assert len(traced) >= 0.9 * len(m.graph.node)  # the exporter's own rewrites (a Split) carry none
    assert any(e.key == "location" for t in m.graph.initializer for e in t.external_data)


@pytest.mark.parametrize("objective", list(OBJECTIVES))
def test_every_objective_keeps_outputs_and_torch_metadata(model, tmp_path, objective):
    data_before = (model.parent / "dynamo_decoder.onnx.data").read_bytes()
    out = tmp_path / "out" / "decoder.onnx"
    out.parent.mkdir()
    res = subprocess.run([sys.executable, "-m", "onnx_sched.cli.__main__", "optimize", str(model), "-o", str(out),
                          "--objective", objective, *OBJECTIVES[objective], "--dim", "b=2", "--dim", "s=10",
                          "--time-limit", "2"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    onnx.checker.check_model(str(out), full_check=True)
    for a, b in zip(_run(model), _run(out), strict=True):
        np.testing.assert_array_equal(a, b)
    written = onnx.load(str(out), load_external_data=False)
    given = {n.name: n for n in onnx.load(str(model), load_external_data=False).graph.node}
    for node in written.graph.node:
        keys = {p.key: p.value for p in node.metadata_props}
        assert {p.key: p.value for p in given[node.name].metadata_props}.items() <= keys.items(), node.name
    if objective != "peak-mem":
        placed = [n for n in written.graph.node if any(p.key == "pkg.onnx_sched.device" for p in n.metadata_props)]
        assert placed, "no node carries a device"
    assert (model.parent / "dynamo_decoder.onnx.data").read_bytes() == data_before
