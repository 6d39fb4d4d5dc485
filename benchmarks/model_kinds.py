"""Kinds of ONNX model that onnx's backend test data lacks, built here with torch and ONNX Runtime's tools.

Each kind is what a user's pipeline commonly hands over, and each found an importer bug once (session 26):

* ``transformer_dyn``: two ``nn.TransformerEncoderLayer`` exported with dynamic batch and sequence dims (pinned
  with ``--dim b=2 --dim s=10``);
* ``transformer_ext``: the same with its weights in an external data file (OpenVINO's shapes of a pinned copy);
* ``transformer_qdyn``: the same after ``quantize_dynamic`` (``DynamicQuantizeLinear``, ``MatMulInteger``);
* ``transformer_ortext``: the same as ONNX Runtime's ``EXTENDED`` optimizer saves it (fused ``com.microsoft`` ops);
* ``cnn``, ``cnn_qdq`` and ``cnn_qop``: a small CNN, statically quantized in QDQ and in QOperator format
  (``QLinearConv``, ``com.microsoft`` ``QLinearGlobalAveragePool`` / ``QGemm``: shapes only a run gives);
* ``cnn_ortext``: the CNN as the ``EXTENDED`` optimizer saves it (``FusedConv``);
* ``lstm_gru``: stacked ``LSTM`` and ``GRU`` ops; ``control_flow``: a scripted ``Loop`` and ``If``;
  ``mlp_fp16``: a float16 MLP with ``LayerNormalization``.

:func:`build` writes them (IR 10) with seeded inputs; ``benchmarks/unseen_models.py --source kinds`` runs them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx

#: Dims a kind's inputs leave symbolic, pinned on the command line.
PINNED = ["--dim", "b=2", "--dim", "s=10"]


def build(out: Path) -> list[tuple[Path, dict[str, np.ndarray], list[str]]]:
    """Write every kind to ``out``; ``(model, feeds, extra optimize arguments)`` per kind."""
    import torch

    torch.manual_seed(0)
    out.mkdir(parents=True, exist_ok=True)
    kinds: list[tuple[Path, dict[str, np.ndarray], list[str]]] = []

    def export(module: torch.nn.Module, args: tuple, name: str, names: list[str], dynamic: dict | None = None,
               opset: int = 17) -> Path:
        path = out / f"{name}.onnx"
        torch.onnx.export(module.eval(), args, str(path), input_names=names, dynamic_axes=dynamic,
                          opset_version=opset, dynamo=False)
        model = onnx.load(path)
        model.ir_version = min(model.ir_version, 10)
        onnx.save(model, path)
        return path

    x = torch.randn(2, 10, 64)
    layer = torch.nn.TransformerEncoderLayer(64, 4, 128, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    transformer = export(encoder, (x,), "transformer_dyn", ["x"], {"x": {0: "b", 1: "s"}})
    text = {"x": x.numpy()}
    kinds.append((transformer, text, PINNED))

    external = out / "transformer_ext.onnx"
    onnx.save(onnx.load(transformer), external, save_as_external_data=True, location="transformer_ext.data",
              size_threshold=1024)
    kinds.append((external, text, PINNED))

    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_dynamic, quantize_static

    quantize_dynamic(str(transformer), str(out / "transformer_qdyn.onnx"))
    kinds.append((out / "transformer_qdyn.onnx", text, PINNED))
    kinds.append((_ort_extended(transformer, out / "transformer_ortext.onnx"), text, PINNED))

    cnn = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
                              torch.nn.Conv2d(16, 16, 3, padding=1, groups=4), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                              torch.nn.Conv2d(16, 32, 1), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
                              torch.nn.Linear(32, 5))
    image = torch.randn(1, 3, 32, 32)
    cnn_path = export(cnn, (image,), "cnn", ["x"], opset=13)
    pixels = {"x": image.numpy()}
    kinds.append((cnn_path, pixels, []))

    class Calibration(CalibrationDataReader):
        def __init__(self) -> None:
            rng = np.random.default_rng(0)
            self.batches = iter([{"x": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)} for _ in range(8)])

        def get_next(self) -> dict | None:
            return next(self.batches, None)

    for name, fmt in (("cnn_qdq", QuantFormat.QDQ), ("cnn_qop", QuantFormat.QOperator)):
        quantize_static(str(cnn_path), str(out / f"{name}.onnx"), Calibration(), quant_format=fmt)
        kinds.append((out / f"{name}.onnx", pixels, []))
    kinds.append((_ort_extended(cnn_path, out / "cnn_ortext.onnx"), pixels, []))

    class Recurrent(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = torch.nn.LSTM(16, 32, 2, batch_first=True)
            self.gru = torch.nn.GRU(32, 8, batch_first=True)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.gru(self.lstm(x)[0])[0]

    seq = torch.randn(3, 7, 16)
    kinds.append((export(Recurrent(), (seq,), "lstm_gru", ["x"]), {"x": seq.numpy()}, []))

    class Control(torch.nn.Module):
        def forward(self, x: torch.Tensor, n: int) -> torch.Tensor:
            for _ in range(n):
                x = x * 0.5 + 1
            if x.sum() > 0:
                return x.relu()
            return x.sigmoid()

    x2, n = torch.randn(4, 5), torch.tensor(3)
    kinds.append((export(torch.jit.script(Control()), (x2, n), "control_flow", ["x", "n"]),
                  {"x": x2.numpy(), "n": n.numpy()}, []))

    mlp = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 64),
                              torch.nn.LayerNorm(64), torch.nn.Linear(64, 10)).half()
    half = torch.randn(4, 32).half()
    kinds.append((export(mlp, (half,), "mlp_fp16", ["x"]), {"x": half.numpy()}, []))
    return kinds


def _ort_extended(src: Path, dst: Path) -> Path:
    """``src`` as ONNX Runtime saves it after its ``EXTENDED`` graph optimizations (fused contrib ops)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(dst)
    ort.InferenceSession(str(src), options, providers=["CPUExecutionProvider"])
    return dst
