"""Build Inception-V3 (Szegedy et al. 2016) with seeded random weights and write ONNX + OpenVINO IR.

The architecture is torchvision's ``inception_v3`` (written out here: torchvision is not a
dependency): 299x299 input; stem Conv2d_1a_3x3 .. Conv2d_4a_3x3 with two max pools; Mixed_5b/5c/5d
(InceptionA, pool features 32/64/64); Mixed_6a (InceptionB); Mixed_6b..6e (InceptionC, channels_7x7
128/160/160/192); Mixed_7a (InceptionD); Mixed_7b/7c (InceptionE); adaptive average pool, dropout,
fc 1000.  BasicConv2d = Conv2d(bias=False) + BatchNorm2d(eps=0.001) + ReLU.  No auxiliary head (it is
only used in training).  Weights are random (``torch.manual_seed``), BatchNorm statistics are random
too so the folded network is not an identity; the model is exported in eval mode.

The weights are ~95 MB in float32, so the files are not committed (``.gitignore``); this script is
the reproducible source.  Needs torch and OpenVINO (``pip install -e '.[train,openvino]'``).  One command:

    python examples/make_inception_v3.py            # writes examples/inception_v3.{onnx,xml,bin}

then, e.g.,

    python benchmarks/hsdag_tables.py --models examples/inception_v3.xml --out /tmp/inception_v3_tables.json

Checks: ``onnx.checker``, ONNX Runtime loads the file and matches torch within 1e-4 (max abs diff),
OpenVINO's CPU plugin runs the IR and matches torch within 1e-4.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

try:
    import torch
    import torch.nn.functional as F
    from torch import nn
except ImportError:
    raise SystemExit("make_inception_v3.py needs torch: pip install -e '.[train,openvino]'") from None

HERE = Path(__file__).resolve().parent


class BasicConv2d(nn.Module):
    def __init__(self, cin: int, cout: int, **kw) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, bias=False, **kw)
        self.bn = nn.BatchNorm2d(cout, eps=0.001)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)), inplace=True)


class InceptionA(nn.Module):
    def __init__(self, cin: int, pool_features: int) -> None:
        super().__init__()
        self.branch1x1 = BasicConv2d(cin, 64, kernel_size=1)
        self.branch5x5_1 = BasicConv2d(cin, 48, kernel_size=1)
        self.branch5x5_2 = BasicConv2d(48, 64, kernel_size=5, padding=2)
        self.branch3x3dbl_1 = BasicConv2d(cin, 64, kernel_size=1)
        self.branch3x3dbl_2 = BasicConv2d(64, 96, kernel_size=3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(96, 96, kernel_size=3, padding=1)
        self.branch_pool = BasicConv2d(cin, pool_features, kernel_size=1)

    def forward(self, x):
        b1 = self.branch1x1(x)
        b5 = self.branch5x5_2(self.branch5x5_1(x))
        b3 = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        bp = self.branch_pool(F.avg_pool2d(x, kernel_size=3, stride=1, padding=1))
        return torch.cat([b1, b5, b3, bp], 1)


class InceptionB(nn.Module):
    def __init__(self, cin: int) -> None:
        super().__init__()
        self.branch3x3 = BasicConv2d(cin, 384, kernel_size=3, stride=2)
        self.branch3x3dbl_1 = BasicConv2d(cin, 64, kernel_size=1)
        self.branch3x3dbl_2 = BasicConv2d(64, 96, kernel_size=3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(96, 96, kernel_size=3, stride=2)

    def forward(self, x):
        b3 = self.branch3x3(x)
        bd = self.branch3x3dbl_3(self.branch3x3dbl_2(self.branch3x3dbl_1(x)))
        bp = F.max_pool2d(x, kernel_size=3, stride=2)
        return torch.cat([b3, bd, bp], 1)


class InceptionC(nn.Module):
    def __init__(self, cin: int, channels_7x7: int) -> None:
        super().__init__()
        c7 = channels_7x7
        self.branch1x1 = BasicConv2d(cin, 192, kernel_size=1)
        self.branch7x7_1 = BasicConv2d(cin, c7, kernel_size=1)
        self.branch7x7_2 = BasicConv2d(c7, c7, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7_3 = BasicConv2d(c7, 192, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_1 = BasicConv2d(cin, c7, kernel_size=1)
        self.branch7x7dbl_2 = BasicConv2d(c7, c7, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_3 = BasicConv2d(c7, c7, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7dbl_4 = BasicConv2d(c7, c7, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7dbl_5 = BasicConv2d(c7, 192, kernel_size=(1, 7), padding=(0, 3))
        self.branch_pool = BasicConv2d(cin, 192, kernel_size=1)

    def forward(self, x):
        b1 = self.branch1x1(x)
        b7 = self.branch7x7_3(self.branch7x7_2(self.branch7x7_1(x)))
        bd = self.branch7x7dbl_1(x)
        for m in (self.branch7x7dbl_2, self.branch7x7dbl_3, self.branch7x7dbl_4, self.branch7x7dbl_5):
            bd = m(bd)
        bp = self.branch_pool(F.avg_pool2d(x, kernel_size=3, stride=1, padding=1))
        return torch.cat([b1, b7, bd, bp], 1)


class InceptionD(nn.Module):
    def __init__(self, cin: int) -> None:
        super().__init__()
        self.branch3x3_1 = BasicConv2d(cin, 192, kernel_size=1)
        self.branch3x3_2 = BasicConv2d(192, 320, kernel_size=3, stride=2)
        self.branch7x7x3_1 = BasicConv2d(cin, 192, kernel_size=1)
        self.branch7x7x3_2 = BasicConv2d(192, 192, kernel_size=(1, 7), padding=(0, 3))
        self.branch7x7x3_3 = BasicConv2d(192, 192, kernel_size=(7, 1), padding=(3, 0))
        self.branch7x7x3_4 = BasicConv2d(192, 192, kernel_size=3, stride=2)

    def forward(self, x):
        b3 = self.branch3x3_2(self.branch3x3_1(x))
        b7 = self.branch7x7x3_4(self.branch7x7x3_3(self.branch7x7x3_2(self.branch7x7x3_1(x))))
        bp = F.max_pool2d(x, kernel_size=3, stride=2)
        return torch.cat([b3, b7, bp], 1)


class InceptionE(nn.Module):
    def __init__(self, cin: int) -> None:
        super().__init__()
        self.branch1x1 = BasicConv2d(cin, 320, kernel_size=1)
        self.branch3x3_1 = BasicConv2d(cin, 384, kernel_size=1)
        self.branch3x3_2a = BasicConv2d(384, 384, kernel_size=(1, 3), padding=(0, 1))
        self.branch3x3_2b = BasicConv2d(384, 384, kernel_size=(3, 1), padding=(1, 0))
        self.branch3x3dbl_1 = BasicConv2d(cin, 448, kernel_size=1)
        self.branch3x3dbl_2 = BasicConv2d(448, 384, kernel_size=3, padding=1)
        self.branch3x3dbl_3a = BasicConv2d(384, 384, kernel_size=(1, 3), padding=(0, 1))
        self.branch3x3dbl_3b = BasicConv2d(384, 384, kernel_size=(3, 1), padding=(1, 0))
        self.branch_pool = BasicConv2d(cin, 192, kernel_size=1)

    def forward(self, x):
        b1 = self.branch1x1(x)
        b3 = self.branch3x3_1(x)
        b3 = torch.cat([self.branch3x3_2a(b3), self.branch3x3_2b(b3)], 1)
        bd = self.branch3x3dbl_2(self.branch3x3dbl_1(x))
        bd = torch.cat([self.branch3x3dbl_3a(bd), self.branch3x3dbl_3b(bd)], 1)
        bp = self.branch_pool(F.avg_pool2d(x, kernel_size=3, stride=1, padding=1))
        return torch.cat([b1, b3, bd, bp], 1)


class InceptionV3(nn.Module):
    def __init__(self, num_classes: int = 1000, dropout: float = 0.5) -> None:
        super().__init__()
        self.Conv2d_1a_3x3 = BasicConv2d(3, 32, kernel_size=3, stride=2)
        self.Conv2d_2a_3x3 = BasicConv2d(32, 32, kernel_size=3)
        self.Conv2d_2b_3x3 = BasicConv2d(32, 64, kernel_size=3, padding=1)
        self.maxpool1 = nn.MaxPool2d(kernel_size=3, stride=2)
        self.Conv2d_3b_1x1 = BasicConv2d(64, 80, kernel_size=1)
        self.Conv2d_4a_3x3 = BasicConv2d(80, 192, kernel_size=3)
        self.maxpool2 = nn.MaxPool2d(kernel_size=3, stride=2)
        self.Mixed_5b = InceptionA(192, pool_features=32)
        self.Mixed_5c = InceptionA(256, pool_features=64)
        self.Mixed_5d = InceptionA(288, pool_features=64)
        self.Mixed_6a = InceptionB(288)
        self.Mixed_6b = InceptionC(768, channels_7x7=128)
        self.Mixed_6c = InceptionC(768, channels_7x7=160)
        self.Mixed_6d = InceptionC(768, channels_7x7=160)
        self.Mixed_6e = InceptionC(768, channels_7x7=192)
        self.Mixed_7a = InceptionD(768)
        self.Mixed_7b = InceptionE(1280)
        self.Mixed_7c = InceptionE(2048)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.dropout = nn.Dropout(p=dropout)
        self.fc = nn.Linear(2048, num_classes)

    def forward(self, x):
        x = self.Conv2d_2b_3x3(self.Conv2d_2a_3x3(self.Conv2d_1a_3x3(x)))
        x = self.maxpool1(x)
        x = self.Conv2d_4a_3x3(self.Conv2d_3b_1x1(x))
        x = self.maxpool2(x)
        for name in ("Mixed_5b", "Mixed_5c", "Mixed_5d", "Mixed_6a", "Mixed_6b", "Mixed_6c", "Mixed_6d",
                     "Mixed_6e", "Mixed_7a", "Mixed_7b", "Mixed_7c"):
            x = getattr(self, name)(x)
        x = self.dropout(self.avgpool(x))
        return self.fc(torch.flatten(x, 1))


def build(seed: int = 0) -> InceptionV3:
    """Inception-V3 with seeded random weights (torchvision-like init) and random BN statistics, in eval mode."""
    torch.manual_seed(seed)
    model = InceptionV3()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.trunc_normal_(m.weight, mean=0.0, std=0.1, a=-2, b=2)
                # keep activations and logits O(1) through 94 conv layers: rescale by fan-in
                # (He gain for the ReLU convs, 0.01 for the fc); otherwise the logits reach ~1e2
                # and float32 rounding alone exceeds the 1e-4 check
                fan_in = m.weight[0].numel()
                gain = 2.0 if isinstance(m, nn.Conv2d) else 0.01
                m.weight.mul_((gain / fan_in) ** 0.5 / 0.1)
            elif isinstance(m, nn.BatchNorm2d):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.1, 0.1)
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    return model.eval()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out-dir", type=Path, default=HERE, help="where inception_v3.{onnx,xml,bin} go (default examples/)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    import onnx
    import onnxruntime as ort

    try:
        import openvino as ov
    except ImportError:
        raise SystemExit("make_inception_v3.py needs OpenVINO: pip install -e '.[openvino]'") from None

    args.out_dir.mkdir(parents=True, exist_ok=True)
    onnx_path = args.out_dir / "inception_v3.onnx"
    xml_path = args.out_dir / "inception_v3.xml"
    model = build(args.seed)
    n_params = sum(p.numel() for p in model.parameters())
    x = torch.from_numpy(np.random.default_rng(args.seed).standard_normal((1, 3, 299, 299)).astype(np.float32))
    with torch.no_grad():
        ref = model(x).numpy()
    torch.onnx.export(model, (x,), str(onnx_path), opset_version=17, input_names=["input"], output_names=["logits"],
                      dynamo=False)
    proto = onnx.load(str(onnx_path))
    proto.ir_version = 10
    onnx.save(proto, str(onnx_path))
    onnx.checker.check_model(str(onnx_path), full_check=True)
    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    got = sess.run(None, {"input": x.numpy()})[0]
    d_ort = float(np.max(np.abs(got - ref)))
    assert d_ort <= 1e-4, f"ONNX Runtime differs from torch by {d_ort}"
    ov_model = ov.convert_model(str(onnx_path))
    ov.save_model(ov_model, str(xml_path), compress_to_fp16=False)
    compiled = ov.Core().compile_model(str(xml_path), "CPU")
    got_ov = compiled(x.numpy())[compiled.output(0)]
    d_ov = float(np.max(np.abs(got_ov - ref)))
    assert d_ov <= 1e-4, f"OpenVINO differs from torch by {d_ov}"
    nodes = len(proto.graph.node)
    print(f"parameters {n_params} ({n_params * 4 / 1e6:.1f} MB float32); ONNX nodes {nodes}; "
          f"logits std {ref.std():.4f}; max |ORT - torch| {d_ort:.2e}; max |OpenVINO CPU - torch| {d_ov:.2e}")
    for p in (onnx_path, xml_path, xml_path.with_suffix(".bin")):
        print(f"{p} {p.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
