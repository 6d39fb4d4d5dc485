"""Real-runtime measurements (ONNX Runtime) of peak memory and latency, in fresh processes."""

from onnx_sched.bench.measure import BenchReport, RunResult, bench_models, ort_optimized_model, random_inputs

__all__ = ["BenchReport", "RunResult", "bench_models", "ort_optimized_model", "random_inputs"]
