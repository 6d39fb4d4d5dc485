"""Real-world architectures the corpus lacks, built offline from random weights, for ``unseen_models.py`` /
``unseen_commands.py --source zoo``.

The corpus (``MANIFEST.tsv``) holds BERT-style encoders, GPT-2 / Llama / Mistral / Pythia decoders without a cache,
T5 / BART, ViT / Swin / ConvNeXt / ResNet / MobileNetV2 / EfficientNet-B0 / SegFormer / YOLOS and the old model-zoo
CNNs.  Each model here is another family a user exports every day, shrunk (layers, widths, image size) to a few
hundred nodes, with seeded random weights (torchvision ``weights=None``, ``transformers`` config objects: nothing
is downloaded).  All but two use the TorchScript exporter (``dynamo=False``, opset 17):

* ``googlenet``: torchvision GoogLeNet (aux heads off), 112x112: four-branch Inception concats with BatchNorm;
* ``inception_v3``: torchvision Inception-v3 (aux head off), 160x160: factorised 1x7 / 7x1 convs, wide concats;
* ``regnet_y_400mf``: torchvision RegNetY-400MF, 96x96: grouped convs with squeeze-excitation gates (``Mul``);
* ``shufflenet_v2_x0_5``: torchvision ShuffleNetV2 0.5x, 96x96: ``Split`` / channel-shuffle ``Reshape`` +
  ``Transpose`` between every block;
* ``mobilenet_v3_small``: torchvision MobileNetV3-Small, 96x96: ``HardSwish`` / ``HardSigmoid`` and SE blocks;
* ``efficientnet_v2_s``: torchvision EfficientNetV2-S, 96x96: fused-MBConv stages then MBConv with SE (~550 nodes);
* ``deeplabv3_mobilenet_v3``: torchvision DeepLabV3 on MobileNetV3-Large with its aux head, 128x128, 5 classes:
  dilated convs, ASPP with a global-pool branch, bilinear ``Resize``; two full-size outputs (``out``, ``aux``);
* ``maxvit_small``: torchvision ``MaxVit`` (2 stages of 1 block, 64x64): MBConv, block and grid attention with
  relative position bias (window partition ``Reshape`` / ``Transpose`` chains);
* ``qwen2_kv``: ``transformers`` Qwen2ForCausalLM, 2 layers, d=64, GQA 4/2, SDPA attention, one decode step with
  a KV cache: ``past_key_values.*`` inputs, ``present.*`` outputs, a padded ``attention_mask`` over past+new
  tokens; dims batch / seq / past / total left symbolic and pinned with ``--dim``;
* ``clip``: ``transformers`` CLIPModel (2+2 layers, d=32): a text tower and a vision tower in one graph, three
  inputs (token ids, padded mask, two images), four outputs (both logit matrices, both embeddings);
* ``mobilevit``: ``transformers`` MobileViT-XXS-like, 64x64: conv stages with transformer blocks over unfolded
  patches (~1000 nodes, the largest here);
* ``detr``: ``transformers`` DETR with a tiny ResNet backbone (``use_timm_backbone=False``), 1+2 layers, 10
  queries, a ``pixel_mask`` input: a CNN, sine position embeddings, encoder and query decoder; two outputs;
* ``levit``: ``transformers`` LeViT with teacher, 64x64, by torch's default (dynamo) exporter with its defaults
  (opset 18+, weights in ``levit.onnx.data``): attention with learned biases gathered by index, three outputs;
* ``marian``: ``transformers`` MarianMTModel, 2+2 layers, d=32, by the dynamo exporter with dynamic dims batch /
  src / tgt (pinned with ``--dim``), weights in ``marian.onnx.data``: encoder-decoder with cross attention and
  sinusoidal positions, ``decoder_input_ids``; outputs ``logits`` and the encoder's last hidden state.

Left out: torchvision ``squeezenet1_1`` / ``mnasnet0_5`` / ``lraspp_mobilenet_v3_large`` (export cleanly, but are
near copies of ``light_squeezenet`` / MobileNetV2 / ``deeplabv3_mobilenet_v3`` above) and the detection models
(SSD, FCOS, RetinaNet: their ``torchvision::nms`` needs torchvision's C++ ops, which this environment lacks).

This environment's torchvision (0.28.0+cu130) cannot load its C++ extension next to a CPU torch, and then fails at
import (``operator torchvision::nms does not exist``) -- and ``transformers`` imports it too.  :func:`_torchvision`
declares the two ops torchvision's import registers fake kernels for when the extension does not load; the models
here use none of its C++ ops.

:func:`build` exports each model (IR 10), checks it (``onnx.checker`` full check, ONNX Runtime runs it and its
outputs match torch's) and returns ``(path, seeded feeds, extra optimize arguments)`` per model, as
``model_kinds.build`` does; a model that fails a check is left out with a line on stderr.

    python benchmarks/zoo_models.py FOLDER    # writes the models, prints name, nodes, exporter, seconds
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx

Built = tuple[Path, dict[str, np.ndarray], list[str]]
_LIBS: list = []  # torch.library.Library objects must outlive the import


def _torchvision() -> None:
    """Make ``import torchvision`` work where its C++ extension does not load (see module docstring)."""
    import importlib.util

    import torch

    spec = importlib.util.find_spec("torchvision")
    if spec is None or "torchvision" in sys.modules or _LIBS or hasattr(torch.ops.torchvision, "nms"):
        return
    try:
        torch.ops.load_library(str(next(Path(spec.origin).parent.glob("_C*.so"))))
        return
    except (OSError, StopIteration):
        pass
    lib = torch.library.Library("torchvision", "DEF")
    for op in ("nms", "qnms"):
        lib.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _LIBS.append(lib)


def _pin_ir(path: Path) -> None:
    model = onnx.load(path, load_external_data=False)
    model.ir_version = min(model.ir_version, 10)
    onnx.save(model, path)


def _wrap(module, pick: Callable):
    """``module`` wrapped to return the tuple of tensors ``pick(module, *args)`` lists (what the exporters take)."""
    import torch

    class Wrapped(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = module

        def forward(self, *args):
            return tuple(pick(self.inner, *args))

    return Wrapped().eval()


def _realistic(module, calibrate: tuple | None) -> None:
    """Give ``module`` activations of a trained model's scale: random init leaves some of these models' outputs
    at ~1e-9 (MobileNetV3, EfficientNetV2, LeViT) or exactly 0 (MobileViT: BatchNorm scales drawn at std 0.02),
    where any output compares equal.  Norm layers get scales in [0.5, 1.5] and shifts ~N(0, 0.1); with
    ``calibrate`` (a batch of inputs), BatchNorm's running statistics are that batch's (as after training)."""
    import torch

    norms = (torch.nn.modules.batchnorm._BatchNorm, torch.nn.LayerNorm, torch.nn.GroupNorm)
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, norms) and getattr(m, "weight", None) is not None:
                m.weight.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
                if m.bias is not None:
                    m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
        bns = [m for m in module.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
        if calibrate is None or not bns:
            return
        for m in bns:
            m.reset_running_stats()
            m.momentum = None  # a cumulative average: one batch sets the statistics
            m.train()
        module(*calibrate)
        module.eval()


def _export(out: Path, name: str, module, args: tuple, inputs: list[str], outputs: list[str],
            dynamic: dict | None = None, dynamo: bool = False,
            calibrate: tuple | None = None) -> tuple[Path, list[np.ndarray]]:
    """Export ``module(*args)`` to ``out/NAME.onnx`` (TorchScript opset 17, or the dynamo exporter's defaults
    with ``dynamic``, ``torch.export.Dim`` by input name, as its ``dynamic_shapes``), IR pinned to 10, after
    :func:`_realistic` with ``calibrate``; returns the path and torch's outputs."""
    import torch

    path = out / f"{name}.onnx"
    module = module.eval()
    _realistic(module, calibrate)
    with torch.no_grad():
        reference = [t.numpy() for t in module(*args)]
        if dynamo:  # the wrapper's forward(*args): one positional parameter, a tuple
            shapes = (tuple(dynamic.get(n) for n in inputs),) if dynamic else None
            torch.onnx.export(module, args, str(path), input_names=inputs, output_names=outputs,
                              dynamic_shapes=shapes, verbose=False)
        else:
            torch.onnx.export(module, args, str(path), input_names=inputs, output_names=outputs,
                              dynamic_axes=dynamic, opset_version=17, dynamo=False)
    _pin_ir(path)
    return path, reference


def _image(shape: tuple[int, ...] = (1, 3, 96, 96), seed: int = 1):
    import torch

    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _batch(size: int) -> tuple:
    """A calibration batch for :func:`_realistic`: 4 images (BatchNorm after a global pool needs more than one)."""
    return (_image((4, 3, size, size), seed=3),)


def _vision(out: Path, name: str, make: Callable, size: int = 96, outputs: tuple[str, ...] = ("logits",)) -> tuple:
    x = _image((1, 3, size, size))
    path, ref = _export(out, name, _wrap(make(), lambda m, x: [m(x)]), (x,), ["x"], list(outputs),
                        calibrate=_batch(size))
    return path, ref, {"x": x.numpy()}, []


def googlenet(out: Path) -> tuple:
    from torchvision import models

    return _vision(out, "googlenet", lambda: models.googlenet(weights=None, aux_logits=False, init_weights=False), 112)


def inception_v3(out: Path) -> tuple:
    from torchvision import models

    return _vision(out, "inception_v3", lambda: models.inception_v3(weights=None, aux_logits=False,
                                                                    init_weights=False), 160)


def regnet_y_400mf(out: Path) -> tuple:
    from torchvision import models

    return _vision(out, "regnet_y_400mf", lambda: models.regnet_y_400mf(weights=None))


def shufflenet_v2_x0_5(out: Path) -> tuple:
    from torchvision import models

    return _vision(out, "shufflenet_v2_x0_5", lambda: models.shufflenet_v2_x0_5(weights=None))


def mobilenet_v3_small(out: Path) -> tuple:
    from torchvision import models

    return _vision(out, "mobilenet_v3_small", lambda: models.mobilenet_v3_small(weights=None))


def efficientnet_v2_s(out: Path) -> tuple:
    from torchvision import models

    return _vision(out, "efficientnet_v2_s", lambda: models.efficientnet_v2_s(weights=None))


def deeplabv3_mobilenet_v3(out: Path) -> tuple:
    from torchvision.models.segmentation import deeplabv3_mobilenet_v3_large

    x = _image((1, 3, 128, 128))
    model = deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None, aux_loss=True, num_classes=5)
    path, ref = _export(out, "deeplabv3_mobilenet_v3", _wrap(model, lambda m, x: m(x).values()), (x,), ["x"],
                        ["out", "aux"], calibrate=_batch(128))
    return path, ref, {"x": x.numpy()}, []


def maxvit_small(out: Path) -> tuple:
    from torchvision.models.maxvit import MaxVit

    return _vision(out, "maxvit_small", lambda: MaxVit(
        input_size=(64, 64), stem_channels=16, partition_size=4, block_channels=[16, 32], block_layers=[1, 1],
        head_dim=8, stochastic_depth_prob=0.0, num_classes=10), 64)


def qwen2_kv(out: Path) -> tuple:
    import torch
    import transformers as tf

    layers, batch, seq, past = 2, 2, 3, 5
    config = tf.Qwen2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                            use_cache=True, tie_word_embeddings=False)
    config._attn_implementation = "sdpa"
    model = tf.Qwen2ForCausalLM(config)

    def step(m, input_ids, attention_mask, *cache):
        kv = tf.DynamicCache(config=m.config)
        for i in range(layers):
            kv.update(cache[2 * i], cache[2 * i + 1], i)
        result = m(input_ids=input_ids, attention_mask=attention_mask, cache=kv, use_cache=True)  # past_key_values
        return [result.logits, *(t for layer in result.cache.layers for t in (layer.keys, layer.values))]

    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 256, (batch, seq), generator=g)
    mask = torch.ones(batch, past + seq, dtype=torch.int64)
    mask[1, :2] = 0  # the second row left-padded
    cache = [torch.randn(batch, 2, past, 16, generator=g) for _ in range(2 * layers)]
    names = [f"past_key_values.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    presents = [f"present.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    dynamic = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "total"},
               **{n: {0: "batch", 2: "past"} for n in names}, "logits": {0: "batch", 1: "seq"},
               **{n: {0: "batch", 2: "total"} for n in presents}}
    path, ref = _export(out, "qwen2_kv", _wrap(model, step), (ids, mask, *cache),
                        ["input_ids", "attention_mask", *names], ["logits", *presents], dynamic)
    feeds = {"input_ids": ids.numpy(), "attention_mask": mask.numpy(), **{n: t.numpy() for n, t in zip(names, cache)}}
    dims = ["--dim", f"batch={batch}", "--dim", f"seq={seq}", "--dim", f"past={past}", "--dim", f"total={past + seq}"]
    return path, ref, feeds, dims


def clip(out: Path) -> tuple:
    import torch
    import transformers as tf

    config = tf.CLIPConfig(
        text_config={"vocab_size": 200, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                     "num_attention_heads": 4, "max_position_embeddings": 16, "bos_token_id": 0, "eos_token_id": 1},
        vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                       "image_size": 32, "patch_size": 8}, projection_dim=16)

    def pick(m, input_ids, pixel_values, attention_mask):
        o = m(input_ids=input_ids, pixel_values=pixel_values, attention_mask=attention_mask)
        return [o.logits_per_image, o.logits_per_text, o.text_embeds, o.image_embeds]

    ids = torch.randint(2, 200, (3, 12), generator=torch.Generator().manual_seed(1))
    pixels = _image((2, 3, 32, 32))
    mask = torch.ones(3, 12, dtype=torch.int64)
    mask[2, 8:] = 0
    path, ref = _export(out, "clip", _wrap(tf.CLIPModel(config), pick), (ids, pixels, mask),
                        ["input_ids", "pixel_values", "attention_mask"],
                        ["logits_per_image", "logits_per_text", "text_embeds", "image_embeds"])
    return path, ref, {"input_ids": ids.numpy(), "pixel_values": pixels.numpy(), "attention_mask": mask.numpy()}, []


def mobilevit(out: Path) -> tuple:
    import transformers as tf

    config = tf.MobileViTConfig(image_size=64, hidden_sizes=[48, 64, 80],
                                neck_hidden_sizes=[8, 16, 24, 24, 32, 40, 160], num_labels=10,
                                num_attention_heads=2, expand_ratio=2.0)
    x = _image((1, 3, 64, 64))
    path, ref = _export(out, "mobilevit", _wrap(tf.MobileViTForImageClassification(config),
                                                   lambda m, x: [m(pixel_values=x).logits]),
                        (x,), ["pixel_values"], ["logits"], calibrate=_batch(64))
    return path, ref, {"pixel_values": x.numpy()}, []


def detr(out: Path) -> tuple:
    import torch
    import transformers as tf

    backbone = tf.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32, 48, 64], depths=[1, 1, 1, 1],
                               layer_type="basic", out_features=["stage4"])
    config = tf.DetrConfig(use_timm_backbone=False, backbone_config=backbone, use_pretrained_backbone=False,
                           d_model=32, encoder_layers=1, decoder_layers=2, encoder_attention_heads=4,
                           decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, num_queries=10,
                           num_labels=5)

    def pick(m, x, mask):
        o = m(pixel_values=x, pixel_mask=mask)
        return [o.logits, o.pred_boxes]

    x = _image((1, 3, 96, 96))
    mask = torch.ones(1, 96, 96, dtype=torch.int64)
    path, ref = _export(out, "detr", _wrap(tf.DetrForObjectDetection(config), pick), (x, mask),
                        ["pixel_values", "pixel_mask"], ["logits", "pred_boxes"])
    return path, ref, {"pixel_values": x.numpy(), "pixel_mask": mask.numpy()}, []


def levit(out: Path) -> tuple:
    import transformers as tf

    config = tf.LevitConfig(image_size=64, hidden_sizes=[32, 48, 64], num_attention_heads=[2, 3, 4], depths=[1, 1, 1],
                            key_dim=[8, 8, 8], num_labels=10)

    def pick(m, x):
        o = m(pixel_values=x)
        return [o.logits, o.cls_logits, o.distillation_logits]

    x = _image((1, 3, 64, 64))
    path, ref = _export(out, "levit", _wrap(tf.LevitForImageClassificationWithTeacher(config), pick), (x,),
                        ["pixel_values"], ["logits", "cls_logits", "distillation_logits"], dynamo=True,
                        calibrate=_batch(64))
    return path, ref, {"pixel_values": x.numpy()}, []


def marian(out: Path) -> tuple:
    import torch
    import transformers as tf

    config = tf.MarianConfig(vocab_size=300, decoder_vocab_size=300, d_model=32, encoder_layers=2, decoder_layers=2,
                             encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                             decoder_ffn_dim=64, max_position_embeddings=64, pad_token_id=299,
                             decoder_start_token_id=299)

    def pick(m, input_ids, attention_mask, decoder_input_ids):
        o = m(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids,
              use_cache=False)
        return [o.logits, o.encoder_last_hidden_state]

    g = torch.Generator().manual_seed(1)
    ids, decoder = torch.randint(0, 299, (2, 12), generator=g), torch.randint(0, 299, (2, 5), generator=g)
    mask = torch.ones(2, 12, dtype=torch.int64)
    mask[1, 9:] = 0
    batch, src, tgt = (torch.export.Dim(n, max=m) for n, m in (("batch", 8), ("src", 60), ("tgt", 60)))
    dims = {"input_ids": {0: batch, 1: src}, "attention_mask": {0: batch, 1: src},
            "decoder_input_ids": {0: batch, 1: tgt}}
    path, ref = _export(out, "marian", _wrap(tf.MarianMTModel(config), pick), (ids, mask, decoder),
                        ["input_ids", "attention_mask", "decoder_input_ids"], ["logits", "encoder_last_hidden_state"],
                        dims, dynamo=True)
    return (path, ref, {"input_ids": ids.numpy(), "attention_mask": mask.numpy(), "decoder_input_ids": decoder.numpy()},
            ["--dim", "batch=2", "--dim", "src=12", "--dim", "tgt=5"])


ZOO: dict[str, Callable[[Path], tuple]] = {f.__name__: f for f in (
    googlenet, inception_v3, regnet_y_400mf, shufflenet_v2_x0_5, mobilenet_v3_small, efficientnet_v2_s,
    deeplabv3_mobilenet_v3, maxvit_small, qwen2_kv, clip, mobilevit, detr, levit, marian)}

DYNAMO = {"levit", "marian"}


def build(out: Path, names: list[str] | None = None, verbose: bool = False) -> list[Built]:
    """Write every model of :data:`ZOO` (or ``names``) to ``out``, checked (module docstring); ``(path, feeds,
    extra arguments)`` each.  ``verbose``: print name, nodes, exporter and seconds per model."""
    import logging
    import warnings

    import onnxruntime as ort
    import torch

    _torchvision()
    logging.getLogger("transformers").setLevel(logging.ERROR)
    out.mkdir(parents=True, exist_ok=True)
    built = []
    for name in names or ZOO:
        t0 = time.perf_counter()
        torch.manual_seed(0)
        with warnings.catch_warnings():  # the exporters' tracer warnings
            warnings.simplefilter("ignore")
            try:
                path, reference, feeds, extra = ZOO[name](out)
            except Exception as exc:  # noqa: BLE001 -- a model that does not export is left out, said why
                print(f"zoo_models: {name} left out: export failed: {str(exc).splitlines()[0][:200]}", file=sys.stderr)
                continue
        try:
            onnx.checker.check_model(str(path), full_check=True)
            got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
        except Exception as exc:  # noqa: BLE001
            print(f"zoo_models: {name} left out: {str(exc).splitlines()[0][:200]}", file=sys.stderr)
            continue
        if len(got) != len(reference) or any(np.shape(a) != np.shape(b) for a, b in zip(got, reference)):
            print(f"zoo_models: {name} left out: ONNX Runtime's outputs differ from torch's in number or shape",
                  file=sys.stderr)
            continue
        worst = max((float(np.abs(a - b).max(initial=0.0)) for a, b in zip(got, reference)), default=0.0)
        if not all(np.allclose(a, b, rtol=1e-3, atol=1e-4) for a, b in zip(got, reference)):
            print(f"zoo_models: {name} left out: ONNX Runtime's outputs differ from torch's (max |diff| {worst:.2g})",
                  file=sys.stderr)
            continue
        scale = min((float(np.abs(r).max(initial=0.0)) for r in reference if r.dtype.kind == "f"), default=1.0)
        if scale < 1e-4:
            print(f"zoo_models: {name} left out: an output is all (near) zero (max |out| {scale:.1g})", file=sys.stderr)
            continue
        built.append((path, feeds, extra))
        if verbose:
            nodes = len(onnx.load(path, load_external_data=False).graph.node)
            print(f"{name}\t{nodes} nodes\t{'dynamo' if name in DYNAMO else 'torchscript'}\t"
                  f"max|ort-torch| {worst:.1e}\tmin max|out| {scale:.2g}\t{time.perf_counter() - t0:.1f} s", flush=True)
    return built


if __name__ == "__main__":
    t0 = time.perf_counter()
    models = build(Path(sys.argv[1] if len(sys.argv) > 1 else "zoo_models"), sys.argv[2:] or None, verbose=True)
    print(f"{len(models)} models in {time.perf_counter() - t0:.1f} s")
