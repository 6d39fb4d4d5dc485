"""Real ONNX Runtime and OpenVINO measurements: file order changes measured peak RSS (ORT); reorders are
bitwise equal in ORT and equal within rtol=atol=1e-5 in OpenVINO."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from conftest import branchy_model as small_branchy_model
from onnx import TensorProto as T
from onnx import helper as h

from onnx_sched.bench.measure import (
    ORT_OPTIMIZED_KEY,
    bench_models,
    model_opt_level,
    ort_optimized_model,
    random_inputs,
)
from onnx_sched.cli import main

ROWS, COLS = 4096, 1024  # one float32 branch tensor = 16 MiB
BRANCH_BYTES = ROWS * COLS * 4


def branchy_model(depth_first: bool, scale: float = 1.0, branches: int = 3) -> onnx.ModelProto:
    """``branches`` independent x -> Mul -> Expand(16 MiB) -> Relu -> ReduceSum chains, summed.

    Breadth-first order keeps every branch's big tensor alive at once;
    depth-first finishes one branch (and frees its tensor) before the next.
    """
    inits = [h.make_tensor("shape", T.INT64, [2], [ROWS, COLS]), h.make_tensor("axes", T.INT64, [1], [0])]
    chains = []
    for b in range(branches):
        inits.append(h.make_tensor(f"c{b}", T.FLOAT, [1], [scale * (b + 1)]))
        chains.append(
            [
                h.make_node("Mul", ["x", f"c{b}"], [f"m{b}"], name=f"mul{b}"),
                h.make_node("Expand", [f"m{b}", "shape"], [f"e{b}"], name=f"expand{b}"),
                h.make_node("Relu", [f"e{b}"], [f"r{b}"], name=f"relu{b}"),
                h.make_node("ReduceSum", [f"r{b}", "axes"], [f"s{b}"], keepdims=0, name=f"sum{b}"),
            ]
        )
    if depth_first:
        nodes = [n for chain in chains for n in chain]
    else:
        nodes = [chain[i] for i in range(4) for chain in chains]
    nodes.append(h.make_node("Sum", [f"s{b}" for b in range(branches)], ["y"], name="total"))
    graph = h.make_graph(
        nodes,
        "branchy",
        [h.make_tensor_value_info("x", T.FLOAT, [COLS])],
        [h.make_tensor_value_info("y", T.FLOAT, [COLS])],
        initializer=inits,
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    return model


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("bench")
    paths = {"bf": d / "breadth.onnx", "df": d / "depth.onnx", "other": d / "other.onnx"}
    onnx.save(branchy_model(False), paths["bf"])
    onnx.save(branchy_model(True), paths["df"])
    onnx.save(branchy_model(True, scale=-1.0), paths["other"])
    return paths


def _digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_depth_first_order_peaks_lower(models: dict[str, Path]) -> None:
    before = {k: _digest(p) for k, p in models.items()}
    report = bench_models(models["bf"], models["df"], repeats=2, warmup=1, arenas=(False, True), ort_opt=False)
    bf, df = report.run("in", False), report.run("out", False)
    # Arena off: breadth-first holds >= 3 big tensors at once, depth-first about one or two.
    assert bf.peak_rss_delta >= 2 * BRANCH_BYTES
    assert df.peak_rss_delta <= bf.peak_rss_delta - BRANCH_BYTES
    # Arena on: the arena grows to the order's peak and keeps it.
    assert report.run("out", True).peak_rss_delta <= report.run("in", True).peak_rss_delta - BRANCH_BYTES
    assert report.outputs_equal is True and report.mismatched_outputs == ()
    assert bf.latency_p90_s >= bf.latency_median_s > 0
    assert {k: _digest(p) for k, p in models.items()} == before  # inputs never modified


def test_profile_shows_ort_runs_file_order(models: dict[str, Path]) -> None:
    report = bench_models(models["bf"], repeats=1, warmup=0, arenas=(True,), ort_opt=False, profile=True)
    run = report.run("in", True)
    assert report.outputs_equal is None
    assert run.raw["executed_in_file_order"] is True
    assert run.raw["ort_profile"]["executed_nodes"][:3] == ["mul0", "mul1", "mul2"]


def test_different_outputs_are_reported(models: dict[str, Path]) -> None:
    report = bench_models(models["df"], models["other"], repeats=1, warmup=0, arenas=(False,))
    assert report.outputs_equal is False
    assert report.mismatched_outputs == ("y",)


def test_random_inputs_are_seeded_and_small_ints() -> None:
    x = h.make_tensor_value_info("ids", T.INT64, ["batch", 7])
    m = h.make_tensor_value_info("mask", T.BOOL, [2, 3])
    f = h.make_tensor_value_info("f", T.FLOAT16, [4])
    graph = h.make_graph([], "g", [x, m, f], [x])
    model = h.make_model(graph, ir_version=8)
    a = random_inputs(model, seed=3, dims={"batch": 5})
    b = random_inputs(model, seed=3, dims={"batch": 5})
    assert a["ids"].shape == (5, 7) and a["ids"].dtype == np.int64
    assert set(np.unique(a["ids"]).tolist()) <= {0, 1}
    assert a["mask"].dtype == np.bool_ and a["f"].dtype == np.float16
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert random_inputs(model, seed=3)["ids"].shape == (1, 7)


def test_ort_optimized_model_is_marked_and_benched_without_reoptimizing(tmp_path: Path) -> None:
    # Constant-foldable subgraph: ORT (basic) folds Add(c, c) into one initializer.
    nodes = [
        h.make_node("Add", ["c", "c"], ["cc"], name="fold_me"),
        h.make_node("Mul", ["x", "cc"], ["y"], name="mul"),
    ]
    graph = h.make_graph(
        nodes,
        "foldable",
        [h.make_tensor_value_info("x", T.FLOAT, [8])],
        [h.make_tensor_value_info("y", T.FLOAT, [8])],
        initializer=[h.make_tensor("c", T.FLOAT, [8], np.arange(8, dtype=np.float32))],
    )
    src = tmp_path / "src.onnx"
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8), src)
    digest = _digest(src)
    dst = ort_optimized_model(src, tmp_path / "ort.onnx")
    opt = onnx.load(dst)
    assert model_opt_level(opt) == "basic"
    assert [n.op_type for n in opt.graph.node] == ["Mul"]
    assert _digest(src) == digest
    with pytest.raises(ValueError, match="overwrite"):
        ort_optimized_model(src, src)
    report = bench_models(src, dst, repeats=1, warmup=0, arenas=(False,))
    assert report.run("in", False).opt_level == "basic"
    assert report.run("out", False).opt_level == "none"
    assert report.outputs_equal is True
    assert any(p.key == ORT_OPTIMIZED_KEY for p in opt.metadata_props)


def test_cli_bench_writes_json_and_table(models: dict[str, Path], tmp_path: Path) -> None:
    out_json = tmp_path / "r.json"
    result = CliRunner().invoke(
        main,
        ["bench", str(models["bf"]), str(models["df"]), "--runtime", "ort", "--repeats", "1",
         "--warmup", "0", "--arena", "off", "--no-ort-opt", "--json", str(out_json)],
    )
    assert result.exit_code == 0, result.output
    assert "bitwise equal" in result.output
    data = json.loads(out_json.read_text())
    assert data["outputs_equal"] is True
    runs = [(r["label"], r["arena"], r["opt_level"]) for r in data["runs"]]
    assert runs == [("in", False, "none"), ("out", False, "none")]


def test_cli_bench_runs_a_model_with_string_inputs_and_outputs(tmp_path: Path) -> None:
    """A string input gets seeded words, string outputs are saved without pickling and compared."""
    nodes = [h.make_node("LabelEncoder", ["text"], ["ids"], domain="ai.onnx.ml", keys_strings=["cat", "dog"],
                         values_int64s=[1, 2], default_int64=0, name="enc"),
             h.make_node("Cast", ["ids"], ["f"], to=T.FLOAT, name="cast"),
             h.make_node("Relu", ["f"], ["y"], name="relu"),
             h.make_node("Identity", ["text"], ["echo"], name="echo")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("text", T.STRING, [4])],
                         [h.make_tensor_value_info("y", T.FLOAT, [4]), h.make_tensor_value_info("echo", T.STRING, [4])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("ai.onnx.ml", 3)])
    model.ir_version = 10
    src, out = tmp_path / "text.onnx", tmp_path / "text_out.onnx"
    onnx.save(model, src)
    result = CliRunner().invoke(main, ["optimize", str(src), "-o", str(out)])
    assert result.exit_code == 0, result.output
    result = CliRunner().invoke(main, ["bench", str(src), str(out), "--runtime", "ort", "--repeats", "1",
                                       "--warmup", "0", "--arena", "off"])
    assert result.exit_code == 0, result.output
    assert "bitwise equal" in result.output


def _sequence_and_optional_model(scale: float) -> onnx.ModelProto:
    """Outputs: a sequence of x's rows times ``scale``, its length, an optional holding x, an empty optional."""
    nodes = [h.make_node("Mul", ["x", "k"], ["xk"], name="mul"),
             h.make_node("SplitToSequence", ["xk"], ["rows"], axis=0, name="split"),
             h.make_node("SequenceLength", ["rows"], ["n"], name="len"),
             h.make_node("Optional", ["x"], ["some"], name="some"),
             h.make_node("Optional", [], ["none"], type=h.make_tensor_type_proto(T.FLOAT, [4, 3]), name="none")]
    optional = h.make_optional_type_proto(h.make_tensor_type_proto(T.FLOAT, [4, 3]))
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [4, 3])],
                         [h.make_tensor_sequence_value_info("rows", T.FLOAT, None),
                          h.make_tensor_value_info("n", T.INT64, []),
                          h.make_value_info("some", optional), h.make_value_info("none", optional)],
                         initializer=[h.make_tensor("k", T.FLOAT, [], [scale])])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)], ir_version=10)
    onnx.checker.check_model(model, full_check=True)
    return model


def test_bench_compares_sequence_and_optional_outputs(tmp_path: Path) -> None:
    """A sequence output is compared element by element and an empty optional as empty: the runner saved outputs as
    one array each and failed on both ("'list' object has no attribute 'dtype'")."""
    paths = {}
    for name, scale in (("a", 2.0), ("b", 2.0), ("c", 3.0)):
        paths[name] = tmp_path / f"{name}.onnx"
        onnx.save(_sequence_and_optional_model(scale), paths[name])
    same = bench_models(paths["a"], paths["b"], repeats=1, warmup=0, arenas=(False,))
    assert same.outputs_equal is True
    other = bench_models(paths["a"], paths["c"], repeats=1, warmup=0, arenas=(False,))
    assert other.outputs_equal is False and other.mismatched_outputs == ("rows",)


def _noisy_model(scale: float) -> onnx.ModelProto:
    """noisy = x + RandomUniformLike(x) (unseeded) and clean = x * ``scale``."""
    nodes = [h.make_node("RandomUniformLike", ["x"], ["u"], name="draw"), h.make_node("Add", ["x", "u"], ["noisy"]),
             h.make_node("Mul", ["x", "k"], ["clean"], name="scale")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [64])],
                         [h.make_tensor_value_info(n, T.FLOAT, [64]) for n in ("noisy", "clean")],
                         initializer=[h.make_tensor("k", T.FLOAT, [], [scale])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=10)


def test_bench_leaves_out_outputs_an_unseeded_random_op_feeds(tmp_path: Path) -> None:
    """Two processes draw different values for an unseeded random op, so ``bench M M`` said the outputs differ
    and failed; they are left out and named, and the other outputs are still compared."""
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save(_noisy_model(2.0), a)
    onnx.save(_noisy_model(3.0), b)
    same = bench_models(a, a, repeats=1, warmup=0, arenas=(False,))
    assert same.outputs_equal is True and same.unchecked_outputs == ("noisy",)
    other = bench_models(a, b, repeats=1, warmup=0, arenas=(False,))
    assert other.outputs_equal is False and other.mismatched_outputs == ("clean",)
    result = CliRunner().invoke(main, ["bench", str(a), str(a), "--repeats", "1", "--warmup", "0", "--arena", "off"])
    assert result.exit_code == 0, result.output
    assert "not compared" in result.output and "noisy" in result.output and "bitwise equal" in result.output


def test_cli_bench_bad_model_is_one_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    result = CliRunner().invoke(main, ["bench", str(bad)])
    assert result.exit_code == 2
    assert "cannot read ONNX model" in result.output


@pytest.fixture(scope="module")
def small_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A small breadth-first model (3 x 256 x 256 branches) and its reordering by ``onnx-sched optimize``."""
    d = tmp_path_factory.mktemp("bench_ov")
    src, out = d / "small.onnx", d / "small.sched.onnx"
    onnx.save(small_branchy_model(), src)
    result = CliRunner().invoke(main, ["optimize", str(src), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert [n.name for n in onnx.load(out).graph.node] != [n.name for n in onnx.load(src).graph.node]
    return src, out


def test_cli_bench_openvino_measures_model_and_reordering(small_pair: tuple[Path, Path], tmp_path: Path) -> None:
    src, out = small_pair
    report_path = tmp_path / "ov.json"
    result = CliRunner().invoke(
        main, ["bench", str(src), str(out), "--runtime", "openvino", "--repeats", "2", "--report", str(report_path)]
    )
    assert result.exit_code == 0, result.output
    assert "OpenVINO" in result.output and "compile s" in result.output
    assert "equal within rtol=atol=1e-05" in result.output and "before compile" in result.output
    data = json.loads(report_path.read_text())
    assert data["runtime"] == "openvino" and data["comparison"].startswith("allclose")
    assert data["outputs_equal"] is True and 0 <= data["max_abs_error"] <= 1e-5
    assert [r["label"] for r in data["runs"]] == ["in", "out"]
    for run in data["runs"]:
        assert run["latency_p90_s"] >= run["latency_median_s"] > 0
        assert run["arena"] is None and run["peak_rss_delta"] >= 0
        assert run["raw"]["compile_s"] > 0 and len(run["raw"]["latency_s"]) == 2
        assert run["raw"]["properties"]["INFERENCE_PRECISION_HINT"] == "f32"
        assert run["raw"]["properties"]["INFERENCE_NUM_THREADS"] == "1"


def test_bench_openvino_reads_ir_with_the_same_inputs(small_pair: tuple[Path, Path], tmp_path: Path) -> None:
    import openvino as ov

    from onnx_sched.exporters.openvino import read_onnx_into_openvino

    src, _ = small_pair
    xml = tmp_path / "small.xml"
    ov.save_model(read_onnx_into_openvino(src), str(xml))
    assert all(np.array_equal(a, b) for a, b in zip(random_inputs(src).values(), random_inputs(xml).values()))
    report = bench_models(src, xml, runtime="openvino", repeats=1, warmup=0)
    assert report.outputs_equal is True and report.runtime == "openvino"
    assert report.run("out").raw["model"] == str(xml)
    with pytest.raises(ValueError, match="OpenVINO IR"):
        bench_models(xml, runtime="ort")


@pytest.mark.parametrize("extra", [["--arena", "off"], ["--no-ort-opt"], ["--profile"]])
def test_cli_bench_openvino_rejects_ort_options(small_pair: tuple[Path, Path], extra: list[str]) -> None:
    src, out = small_pair
    result = CliRunner().invoke(main, ["bench", str(src), str(out), "--runtime", "openvino", *extra])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and extra[0] in lines[0] and "--runtime openvino" in lines[0], result.output
