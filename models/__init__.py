"""Neural networks of onnx-sched and their shipped checkpoints.

Inference modules here import only numpy and onnxruntime; training code that
needs torch lives in ``*_train.py`` modules and the ``[train]`` extra.
"""
