"""Device profiles: per-op latency on a device plus a transfer model, measured or simulated.

One module per job; this package re-exports their public names, so
``from onnx_sched.profiling import load_profiles, SIMULATED_PRESETS, ...`` is how
callers use it.

* :mod:`~onnx_sched.profiling.profiles`: :class:`DeviceProfile`,
  :class:`ProfileSet`, :class:`TransferModel`, op classes, and the JSON files
  (``format: onnx-sched-profiles/1``; :func:`load_profiles`, :func:`save_profiles`);
* :mod:`~onnx_sched.profiling.rates`: the rate model fitted to measurements
  (:func:`fit_rates`) and per-op seconds of any graph (:func:`op_seconds_matrix`);
* :mod:`~onnx_sched.profiling.simulated`: devices this machine lacks, derived from
  a measured profile by documented factors (:data:`SIMULATED_PRESETS`,
  :func:`add_simulated`), and :func:`scaled_to`;
* :mod:`~onnx_sched.profiling.runtimes`: measuring profiles with OpenVINO
  ``PERF_COUNT`` or ONNX Runtime profiling (:func:`profile_model`);
* :mod:`~onnx_sched.profiling.transfer`: calibrating transfer models by timing
  real copies (:func:`measure_transfer`, :func:`measure_split_transfer`, :func:`measure_split_boundary`, the fit
  :func:`fit_transfer`);
* :mod:`~onnx_sched.profiling.cuda`: torch devices (``cuda:N``, ``torch:cpu``): per-op
  latency with CUDA events (:func:`profile_torch`), pinned host <-> device copies
  (:func:`measure_torch_transfer`) and the split-executor boundary a profile records
  (:func:`measure_torch_boundary`); imports torch only when called;
* :mod:`~onnx_sched.profiling.durations`: duration files of the makespan model
  (:func:`load_profile`, :func:`profile_set_durations`).

Submodules import each other directly, never this ``__init__``, and none imports
:mod:`onnx_sched.cost`, so the cost models can use them without an import cycle.
"""

from __future__ import annotations

from onnx_sched.profiling.cuda import measure_torch_boundary, measure_torch_transfer, profile_torch, profile_torch_set
from onnx_sched.profiling.durations import is_profile_set, load_profile, profile_set_durations
from onnx_sched.profiling.profiles import (
    CLASSES,
    COMPUTE_OPS,
    FORMAT,
    DeviceProfile,
    ProfileSet,
    TransferModel,
    load_profiles,
    op_class,
    save_profiles,
)
from onnx_sched.profiling.rates import fit_rates, measured_ops, op_seconds_matrix, op_seconds_vector
from onnx_sched.profiling.runtimes import profile_model, profile_openvino, profile_ort
from onnx_sched.profiling.simulated import SIMULATED_PRESETS, add_simulated, derive_profile, scaled_to
from onnx_sched.profiling.transfer import (
    fit_transfer,
    measure_host_boundary,
    measure_split_boundary,
    measure_split_transfer,
    measure_transfer,
)

__all__ = [
    "CLASSES",
    "COMPUTE_OPS",
    "FORMAT",
    "SIMULATED_PRESETS",
    "DeviceProfile",
    "ProfileSet",
    "TransferModel",
    "add_simulated",
    "derive_profile",
    "fit_rates",
    "fit_transfer",
    "is_profile_set",
    "load_profile",
    "load_profiles",
    "measure_host_boundary",
    "measure_split_boundary",
    "measure_split_transfer",
    "measure_torch_boundary",
    "measure_torch_transfer",
    "measure_transfer",
    "op_class",
    "measured_ops",
    "op_seconds_matrix",
    "op_seconds_vector",
    "profile_model",
    "profile_openvino",
    "profile_ort",
    "profile_torch",
    "profile_torch_set",
    "profile_set_durations",
    "save_profiles",
    "scaled_to",
]
