"""Neural networks of onnx-sched and their shipped checkpoints.

* ``inference/``: what ``onnx-sched optimize`` runs -- node features, the ONNX Runtime
  encoders, the decoders and the HSDAG placer.  numpy, numba and onnxruntime only.
* ``training/``: the torch models and training loops (the ``[train]`` extra); never
  imported by the light install.
* ``checkpoints/``: the shipped weights (ONNX for inference, ``.pt`` for training)
  and their model cards.
"""

from pathlib import Path

#: Folder of the shipped checkpoints (``*.onnx``, ``*.pt``) and model cards (``*.md``).
CHECKPOINTS = Path(__file__).resolve().parent / "checkpoints"
