"""One model measured in a fresh Python process: what every runtime's runner shares.

``onnx-sched bench`` measures each model in its own interpreter
(``python -m <runner> MODEL INPUTS.npz ...``) so that peak RSS reflects only that
model: memory freed by a previous model, an arena grown by another session or
Python objects of the parent never leak into the number.  The runners are
:mod:`onnx_sched.bench.ort_runner` (ONNX Runtime) and
:mod:`onnx_sched.bench.runtimes.openvino_runner` (OpenVINO);
:mod:`onnx_sched.bench.measure` starts them.  One module for what they share, so
both runtimes are launched, timed and measured the same way:

* parent side: :func:`run_runner` starts a runner with a fixed malloc threshold
  and returns its one JSON line; a failure or timeout is one line;
* child side: :class:`PeakRssWindow`, the peak RSS delta of a block of code,
  measured two ways and the larger kept: a background thread sampling ``psutil``
  RSS (the runtimes release the GIL while they run) and ``getrusage``
  ``ru_maxrss`` (exact, but a lifetime maximum, so it counts only when the block
  raised it); :func:`latency_fields` (median / p90 of the timed runs);
  :func:`runner_parser` and :func:`runner_main`, the common command line (inputs
  ``.npz`` in; outputs ``.npz`` and one JSON line out; bad input one line on
  stderr and exit status 2, never a traceback).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, final

import numpy as np

from onnx_sched.bench.timing import summarize
from onnx_sched.errors import OnnxSchedError, RuntimeCrashError, first_line

__all__ = ["MALLOC_ENV", "PeakRssWindow", "latency_fields", "rss", "run_runner", "runner_main", "runner_parser"]

# Fixed malloc threshold: large buffers are mmap'ed and returned to the OS at once
# when freed, so RSS follows live memory.  Without it glibc raises the threshold
# after the first big free and later buffers stay in the heap, blurring the peak
# (measured: a depth-first 3 x 16 MiB model read +67.7 MB without it, +17.3 MB with it).
MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "131072"}

#: What a runner's measure function gets (parsed arguments, inputs) and returns (report, outputs by name).
Measure = Callable[[argparse.Namespace, dict[str, np.ndarray]], tuple[dict[str, Any], Mapping[str, np.ndarray]]]


_REFUSED = "error: "  # how runner_main starts its one line on bad input


def run_runner(
    module: str,
    runtime: str,
    model_path: str | os.PathLike[str],
    inputs_npz: str | os.PathLike[str],
    *,
    repeats: int,
    warmup: int,
    threads: int,
    outputs_npz: str | os.PathLike[str] | None = None,
    extra_args: Sequence[str] = (),
    timeout_s: float = 600.0,
) -> dict[str, Any]:
    """Run ``python -m module`` on one model in a fresh interpreter; return its JSON report.

    ``runtime`` names the runtime in error messages ("ORT run of m.onnx failed ...").
    """
    cmd = [sys.executable, "-m", module, str(model_path), str(inputs_npz), "--repeats", str(repeats),
           "--warmup", str(warmup), "--threads", str(threads), *extra_args]
    if outputs_npz is not None:
        cmd += ["--outputs", str(outputs_npz)]
    env = {**os.environ, **MALLOC_ENV}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env, check=False)
    except subprocess.TimeoutExpired as exc:
        raise OnnxSchedError(f"{runtime} run of {model_path} took longer than {timeout_s:.0f} s") from exc
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no stderr)"])[-1]
        if proc.returncode == 2 and tail.startswith(_REFUSED):  # the runner's own one line: bad input, not a crash
            reason = tail.removeprefix(_REFUSED)
            raise OnnxSchedError(reason if str(model_path) in reason else f"{model_path}: {reason}")
        if proc.returncode < 0:  # killed by a signal: a crash in the runtime's own code, said by name
            said = f": {tail}" if proc.stderr.strip() else ", with no message"
            signal_name = _signal_name(-proc.returncode)
            where = "killed from outside: out of memory?" if signal_name == "SIGKILL" else f"in {runtime}'s own code"
            raise RuntimeCrashError(f"{runtime} crashed running {model_path} (exit {proc.returncode}, "
                                    f"{signal_name}, {where}){said}")
        raise OnnxSchedError(f"{runtime} run of {model_path} failed (exit {proc.returncode}): {tail}")
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        raise OnnxSchedError(f"{runtime} run of {model_path} printed no JSON report")
    return json.loads(lines[-1])


def rss() -> int:
    """The RSS of this process now (bytes)."""
    import psutil

    return int(psutil.Process().memory_info().rss)


def _maxrss_bytes() -> int:
    # Linux reports kilobytes, macOS bytes.
    scale = 1 if sys.platform == "darwin" else 1024
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * scale


@final
class PeakRssWindow:
    """``with PeakRssWindow() as mem: ...``; then ``mem.fields()``: the RSS high-water
    mark inside the block minus the RSS at entry (bytes), and how it was measured."""

    def __init__(self, interval_s: float = 0.0005) -> None:
        import psutil

        self._proc = psutil.Process()
        self._interval = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.peak = self.samples = self.rss_before = self.rss_after = 0
        self._maxrss_before = self._maxrss_after = 0

    def _loop(self) -> None:
        while not self._stop.is_set():
            rss = self._proc.memory_info().rss
            self.samples += 1
            self.peak = max(self.peak, rss)
            self._stop.wait(self._interval)

    def __enter__(self) -> PeakRssWindow:
        self.rss_before = rss()
        self._maxrss_before = _maxrss_bytes()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._maxrss_after = _maxrss_bytes()
        self.rss_after = rss()

    def fields(self) -> dict[str, Any]:
        """Report fields: ``peak_rss_delta`` (the larger of the two ways) and its parts."""
        sampled = max(0, self.peak - self.rss_before)
        # ru_maxrss is a lifetime maximum: it tells about the block only if the block raised it.
        maxrss = max(0, self._maxrss_after - self.rss_before) if self._maxrss_after > self._maxrss_before else 0
        return {
            "rss_before": self.rss_before,
            "rss_after": self.rss_after,
            "peak_rss_delta": max(sampled, maxrss),
            "peak_rss_delta_sampled": sampled,
            "peak_rss_delta_maxrss": maxrss,
            "rss_samples": self.samples,
            # measure.py sets it (MALLOC_ENV); without it glibc keeps freed big buffers in the heap.
            "malloc_mmap_threshold": os.environ.get("MALLOC_MMAP_THRESHOLD_"),
        }


def latency_fields(times: Sequence[float]) -> dict[str, Any]:
    """Report fields of the timed runs: every latency, their median and p90 (seconds)."""
    s = summarize(times)
    return {"latency_s": [float(t) for t in times], "latency_median_s": s["median_s"], "latency_p90_s": s["p90_s"]}


def runner_parser(prog: str, doc: str) -> argparse.ArgumentParser:
    """The arguments every runner takes; a runner adds its own before :func:`runner_main`."""
    parser = argparse.ArgumentParser(prog=prog, description=doc.strip().split("\n")[0])
    parser.add_argument("model")
    parser.add_argument("inputs", help=".npz file with one array per model input")
    parser.add_argument("--outputs", help="write the outputs of the last run to this .npz (o0, o1, ...)")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    return parser


def runner_main(parser: argparse.ArgumentParser, measure: Measure, argv: Sequence[str] | None = None) -> int:
    """Parse, load the inputs, ``measure``, save the outputs in ``report["outputs"]`` order,
    print the report as one JSON line.  Bad input: one line on stderr, exit 2."""
    args = parser.parse_args(argv)
    try:
        if args.repeats < 1 or args.warmup < 0:
            raise ValueError(f"repeats must be >= 1 and warmup >= 0, got {args.repeats}, {args.warmup}")
        with np.load(args.inputs, allow_pickle=False) as data:
            inputs = {k: data[k] for k in data.files}
        report, outputs = measure(args, inputs)
    except (OnnxSchedError, ValueError, OSError) as exc:
        sys.stderr.write(f"{_REFUSED}{first_line(exc, limit=None)}\n")
        return 2
    if args.outputs:
        from onnx_sched.bench.outputs import npz_outputs

        np.savez(args.outputs, **npz_outputs([outputs[n] for n in report["outputs"]]))
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()
    return 0


def _signal_name(number: int) -> str:
    """``"SIGSEGV"`` for 11; the number where the platform has no name for it.

    >>> _signal_name(11), _signal_name(999)
    ('SIGSEGV', 'signal 999')
    """
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
