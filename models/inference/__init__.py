"""Inference: features, ONNX Runtime encoders, decoders and placers (no torch)."""
