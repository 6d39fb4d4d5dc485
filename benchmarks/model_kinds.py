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

Those use torch's TorchScript exporter (``dynamo=False``).  Since torch 2.9 a plain ``torch.onnx.export`` runs
the ``torch.export`` (dynamo) exporter instead, which needs onnxscript and writes another style of model: opset 18+,
``LayerNormalization`` / ``Gelu`` / ``Trilu`` ops, symbolic dims by name, torch's metadata on every node and, by
default, the weights in a ``.data`` file beside the model.  Where onnxscript is installed (``pip install
onnxscript``) two kinds of that exporter's defaults are added (session 37):

* ``dynamo_gpt``: a 4-block GPT-style decoder (``scaled_dot_product_attention``, causal) with dynamic batch and
  sequence dims and its weights in ``dynamo_gpt.onnx.data``;
* ``dynamo_resnet``: a small residual CNN with ``BatchNorm`` at a static shape.

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
        _pin_ir(path)
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
    return kinds + _dynamo_kinds(out)


def _dynamo_kinds(out: Path) -> list[tuple[Path, dict[str, np.ndarray], list[str]]]:
    """The kinds of torch's default (dynamo) exporter, exported with its defaults; none without onnxscript."""
    import importlib.util
    import sys

    import torch

    if importlib.util.find_spec("onnxscript") is None:
        print("model_kinds: onnxscript is not installed, so the dynamo exporter's kinds are left out",
              file=sys.stderr)
        return []
    gpt = out / "dynamo_gpt.onnx"
    text = dynamo_decoder(gpt)
    torch.manual_seed(0)

    class Residual(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, 2, 1), torch.nn.BatchNorm2d(16), torch.nn.ReLU())
            self.body = torch.nn.Sequential(torch.nn.Conv2d(16, 16, 3, 1, 1), torch.nn.BatchNorm2d(16),
                                            torch.nn.ReLU(), torch.nn.Conv2d(16, 16, 3, 1, 1))
            self.down = torch.nn.Sequential(torch.nn.Conv2d(16, 32, 3, 2, 1), torch.nn.ReLU())
            self.head = torch.nn.Linear(32, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.stem(x)
            x = self.down(torch.relu(x + self.body(x)))
            return self.head(x.mean(dim=(2, 3)))

    image = torch.randn(1, 3, 32, 32)
    resnet = out / "dynamo_resnet.onnx"
    torch.onnx.export(Residual().eval(), (image,), str(resnet), verbose=False)
    _pin_ir(resnet)
    return [(gpt, text, PINNED), (resnet, {"x": image.numpy()}, [])]


def dynamo_decoder(path: Path, blocks: int = 4, width: int = 64, vocab: int = 300) -> dict[str, np.ndarray]:
    """A GPT-style decoder (causal ``scaled_dot_product_attention``, 4 heads) written by torch's default exporter
    with its defaults (weights in ``PATH.data``) and dynamic dims ``b`` and ``s``; returns a seeded feed at b=2,
    s=10.  Needs onnxscript.  ``tests/data/dynamo_decoder.onnx`` is ``blocks=2, width=16, vocab=40``."""
    import torch

    torch.manual_seed(0)

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
            self.qkv, self.proj = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
            self.mlp = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(),
                                           torch.nn.Linear(4 * width, width))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, w = x.shape
            q, k, v = (z.view(b, t, 4, w // 4).transpose(1, 2) for z in self.qkv(self.ln1(x)).split(w, dim=-1))
            y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, w))
            return x + self.mlp(self.ln2(x))

    class Decoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tokens, self.places = torch.nn.Embedding(vocab, width), torch.nn.Embedding(128, width)
            self.blocks = torch.nn.ModuleList(Block() for _ in range(blocks))
            self.ln, self.head = torch.nn.LayerNorm(width), torch.nn.Linear(width, vocab, bias=False)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            x = self.tokens(ids) + self.places(torch.arange(ids.shape[1]))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln(x))

    ids = torch.randint(0, vocab, (2, 10))
    dims = {"ids": {0: torch.export.Dim("b", min=1, max=16), 1: torch.export.Dim("s", min=2, max=128)}}
    torch.onnx.export(Decoder().eval(), (ids,), str(path), dynamic_shapes=dims, verbose=False)
    _pin_ir(path)
    return {"ids": ids.numpy()}


def _pin_ir(path: Path) -> None:
    """ONNX Runtime refuses IR > 13: rewrite the file's IR version to 10, its weights left where they are."""
    model = onnx.load(path, load_external_data=False)
    model.ir_version = min(model.ir_version, 10)
    onnx.save(model, path)


def _ort_extended(src: Path, dst: Path) -> Path:
    """``src`` as ONNX Runtime saves it after its ``EXTENDED`` graph optimizations (fused contrib ops)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(dst)
    ort.InferenceSession(str(src), options, providers=["CPUExecutionProvider"])
    return dst


if __name__ == "__main__":  # the test fixture: python benchmarks/model_kinds.py tests/data/dynamo_decoder.onnx
    import sys

    dynamo_decoder(Path(sys.argv[1]), blocks=2, width=16, vocab=40)
