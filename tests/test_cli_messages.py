"""What the CLI prints: names with brackets survive rich, trainers refuse a light install in one line,
candidate passes say when the time limit cut their sampling or a reference won, ``--candidates`` sizes
BRKGA's population."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import onnx
import pytest
from click.testing import CliRunner
from conftest import BLOCK_TORCH, branchy_model

from onnx_sched.cli import main

ROOT = Path(__file__).resolve().parents[1]
MACHINES = ROOT / "examples" / "machines_cpu_igpu_dgpu.json"


def test_bracketed_names_are_printed_as_given(tmp_path) -> None:
    """rich would read ``[x]`` in a path or an op name as markup and drop it."""
    model, out = tmp_path / "m[x].onnx", tmp_path / "o[y].onnx"
    onnx.save(branchy_model(), model)
    res = CliRunner().invoke(main, ["optimize", str(model), "-o", str(out), "--time-limit", "2"])
    assert res.exit_code == 0, res.output
    assert f"wrote {out}" in res.output.replace("\n", "")
    res = CliRunner().invoke(main, ["inspect", str(model)])
    assert res.exit_code == 0 and "m[x].onnx" in res.output


@pytest.mark.parametrize("trainer", ["peak-mem", "regal", "makespan", "hsdag"])
def test_trainers_refuse_a_light_install_in_one_line(trainer: str) -> None:
    code = BLOCK_TORCH + textwrap.dedent(
        f"""
        from onnx_sched.cli import main
        sys.argv = ["onnx-sched", "train", {trainer!r}]
        main()
        """
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 2, res.stderr[-2000:]
    assert res.stderr.strip().splitlines() == ["onnx-sched: error: training needs torch: pip install 'onnx-sched[train]'"]


def test_pass_through_trainers_show_their_own_options() -> None:
    pytest.importorskip("torch")
    for trainer, option in (("makespan", "--n-ops"), ("hsdag", "--imitation-minutes")):
        res = CliRunner().invoke(main, ["train", trainer, "--help"])
        assert res.exit_code == 0 and option in res.output and f"train {trainer} [-h]" in res.output


def test_bench_openvino_without_openvino_is_one_line(tmp_path) -> None:
    model = tmp_path / "m.onnx"
    onnx.save(branchy_model(), model)
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules["openvino"] = None
        from onnx_sched.cli import main
        sys.argv = ["onnx-sched", "bench", {str(model)!r}, "--runtime", "openvino"]
        main()
        """
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 2, res.stderr[-2000:]
    assert res.stderr.strip().splitlines() == ["onnx-sched: error: OpenVINO is not installed (pip install "
                                               "'onnx-sched[openvino]')"]


def _makespan(tmp_path: Path, *extra: str) -> dict:
    model, report = tmp_path / "m.onnx", tmp_path / "r.json"
    onnx.save(branchy_model(branches=6), model)
    res = CliRunner().invoke(main, ["optimize", str(model), "-o", str(tmp_path / "out.onnx"), "--objective", "makespan",
                                    "--machines", str(MACHINES), "--report", str(report), *extra])
    assert res.exit_code == 0, res.output
    return json.loads(report.read_text())


@pytest.mark.parametrize("asked", [30, 250])
def test_brkga_candidates_size_its_final_population(tmp_path, asked: int) -> None:
    details = _makespan(tmp_path, "--method", "brkga", "--candidates", str(asked), "--time-limit", "5")["details"]
    assert details["candidates_generated"] == asked


def test_gflownet_says_when_the_time_limit_cut_its_samples(tmp_path) -> None:
    report = _makespan(tmp_path, "--method", "gflownet", "--candidates", "1000", "--time-limit", "0.01")
    generated = report["details"]["candidates_generated"]
    assert generated < 1000
    assert f"gflownet generated {generated} of the 1000 candidates asked for before the time limit" in " ".join(
        report["notes"])
    chosen = report["details"]["chosen"]
    if chosen in ("list-cp", "no-split"):  # a reference won: the method says so, as auto's does
        assert report["method_used"] == f"gflownet:{chosen}"
    else:
        assert report["method_used"] == "gflownet"
