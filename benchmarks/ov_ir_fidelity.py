"""What an OpenVINO IR keeps of a schedule: per-op device affinity and op order, measured on the IR corpus.

For each IR model (`../shared/corpus/openvino/*.xml`):

- affinity: per-op ``rt_info["affinity"]`` (first half of ``get_ordered_ops()`` on CPU, the rest
  on CPUB, the CPU plugin registered a second time) -- HETERO sub-models in memory; ops still
  carrying it after ``ov.save_model`` + ``read_model``, and HETERO sub-models then; the same when
  the affinity is written by hand into each layer's ``<rt_info>`` in the XML; and onnx-sched's way
  (placement in model-level rt_info + sidecar file, applied at load by ``read_placed_model``):
  sub-models and outputs against the whole model on CPU;
- op order: the IR written with its ``<layer>`` elements in three topological orders (file,
  seeded random, reversed priorities) -- whether ``read_model`` keeps the written order
  (``get_ordered_ops()``), whether the CPU plugin's execution order (``execOrder`` of
  ``get_runtime_model()``) and its PERF_COUNT sequence (``get_profiling_info()``; names of
  nodes the plugin creates, ``Type_<counter>``, compared without the counter) differ
  between the orders, and the share of op pairs it runs in the written order;
- round trip: ``onnx-sched optimize`` (API) with ``-o out.xml``: outputs of out.xml equal to the
  input's on CPU, f32, seeded random inputs, rtol = atol = 1e-5.

    python benchmarks/ov_ir_fidelity.py --out /tmp/ov_ir_fidelity.json [--models resnet50 bert_base]
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from onnx_sched.api import optimize_model
from onnx_sched.bench.outputs import compare_outputs, outputs_informative
from onnx_sched.bench.runtimes.openvino import ov_inputs
from onnx_sched.bench.runtimes.openvino_inputs import output_names, seeded_inputs
from onnx_sched.dag import kahn_order
from onnx_sched.devices import openvino_core, register_cpu_alias
from onnx_sched.exporters.dispatch import save_model
from onnx_sched.importers.openvino import import_openvino
from onnx_sched.plugins.openvino_affinity import read_placed_model
from onnx_sched.schedule import Schedule

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpus" / "openvino"
F32 = {"INFERENCE_PRECISION_HINT": "f32"}
AUTO_NAME = re.compile(r"^([A-Za-z]+)_\d+$")


def _run(core, model, device: str, feed, names) -> dict[str, np.ndarray]:
    compiled = core.compile_model(model, device, F32 if not device.startswith("HETERO") else {})
    res = compiled.create_infer_request().infer(ov_inputs(compiled, feed))
    return {k: np.array(res[p]) for k, p in zip(names, compiled.outputs)}


def _submodels(core, model) -> int:
    return int(core.compile_model(model, "HETERO:CPU,CPUB").get_property("HETERO_NUMBER_OF_SUBMODELS"))


def affinity(core, xml: Path, tmp: Path) -> dict:
    imp = import_openvino(xml)
    model = core.read_model(str(xml))
    ops = list(model.get_ordered_ops())
    aff = {op.get_friendly_name(): ("CPU" if i < len(ops) // 2 else "CPUB") for i, op in enumerate(ops)}
    for op in ops:
        op.get_rt_info()["affinity"] = aff[op.get_friendly_name()]
    row = {"in_memory_submodels": _submodels(core, model)}
    import openvino as ov

    ov.save_model(model, str(tmp / "aff.xml"), compress_to_fp16=False)
    back = core.read_model(str(tmp / "aff.xml"))
    row["saved_ops_with_affinity"] = sum("affinity" in op.get_rt_info() for op in back.get_ordered_ops())
    row["saved_submodels"] = _submodels(core, back)
    text = (tmp / "aff.xml").read_text()
    layer = re.compile(r'(<layer id="\d+" name="([^"]*)" type="[^"]*" version="[^"]*"\s*>)')
    injected = layer.sub(lambda m: m.group(1) + f'<rt_info><attribute name="affinity" version="0" '
                         f'value="{aff.get(m.group(2), "CPU")}" /></rt_info>', text)
    (tmp / "inj.xml").write_text(injected)
    shutil.copy(tmp / "aff.bin", tmp / "inj.bin")
    back = core.read_model(str(tmp / "inj.xml"))
    row["xml_layers_with_affinity"] = injected.count('name="affinity"')
    row["xml_ops_with_affinity_after_read"] = sum("affinity" in op.get_rt_info() for op in back.get_ordered_ops())
    row["xml_submodels"] = _submodels(core, back)
    # onnx-sched: placement in model-level rt_info + sidecar, applied when the IR is read
    n = imp.graph.n_ops
    placement = (np.arange(n) >= n // 2).astype(np.int64)
    result_model = _export_placed(imp, placement)
    save_model(result_model, tmp / "placed.xml")
    placed, target = read_placed_model(tmp / "placed.xml")
    compiled = core.compile_model(placed, target)
    row["onnx_sched_submodels"] = int(compiled.get_property("HETERO_NUMBER_OF_SUBMODELS"))
    feed, names = seeded_inputs(imp, 0), output_names(imp)
    res = compiled.create_infer_request().infer(ov_inputs(compiled, feed))
    got = {k: np.array(res[p]) for k, p in zip(names, compiled.outputs)}
    ok, err = compare_outputs(_run(core, core.read_model(str(xml)), "CPU", feed, names), got)
    row["onnx_sched_outputs_equal"], row["onnx_sched_max_abs_error"] = bool(ok), float(err)
    return row


def _export_placed(imp, placement: np.ndarray):
    from onnx_sched.exporters.openvino_ir import export_ir

    return export_ir(imp, Schedule(np.arange(imp.graph.n_ops), "half", placement=placement), {}, ["CPU", "CPUB"])


def _write_in_order(xml: Path, op_index: tuple[str, ...], order: np.ndarray, out: Path) -> None:
    """The IR with its ``<layer>`` elements in ``order`` (each op after what it reads)."""
    tree = ET.parse(xml)
    root = tree.getroot()
    layers = root.find("layers")
    elements = list(layers)
    by_id = {e.get("id"): e for e in elements}
    by_name = {e.get("name"): e.get("id") for e in elements}
    preds: dict[str, list[str]] = {}
    for edge in root.find("edges"):
        preds.setdefault(edge.get("to-layer"), []).append(edge.get("from-layer"))
    done: set[str] = set()
    seq: list[str] = []

    def emit(lid: str) -> None:
        stack = [(lid, False)]
        while stack:
            x, ready = stack.pop()
            if x in done:
                continue
            if ready:
                done.add(x)
                seq.append(x)
                continue
            stack.append((x, True))
            stack.extend((p, False) for p in preds.get(x, []) if p not in done)

    for e in elements:
        if e.get("type") == "Parameter":
            emit(e.get("id"))
    for op in order:
        emit(by_name[op_index[int(op)]])
    for e in elements:
        emit(e.get("id"))
    for e in elements:
        layers.remove(e)
    layers.extend(by_id[i] for i in seq)
    tree.write(out, xml_declaration=True, encoding="utf-8")
    shutil.copy(xml.with_suffix(".bin"), out.with_suffix(".bin"))


def op_order(core, xml: Path, tmp: Path) -> dict:
    imp = import_openvino(xml)
    g = imp.graph
    idx = {name: i for i, name in enumerate(imp.op_index)}
    n = g.n_ops
    orders = {"file": np.arange(n), "random": kahn_order(g, np.random.default_rng(1).random(n)),
              "reverse": kahn_order(g, -np.arange(n, dtype=float))}
    row: dict = {"ops": n}
    exec_seqs, perf_seqs = {}, {}
    feed = seeded_inputs(imp, 0)
    for name, order in orders.items():
        path = tmp / f"order_{name}.xml"
        _write_in_order(xml, imp.op_index, order, path)
        model = core.read_model(str(path))
        read = [idx[op.get_friendly_name()] for op in model.get_ordered_ops() if op.get_friendly_name() in idx]
        compiled = core.compile_model(model, "CPU", {**F32, "PERF_COUNT": True})
        layers = []
        for op in compiled.get_runtime_model().get_ordered_ops():
            info = op.get_rt_info()
            if "execOrder" in info:
                names = str(info["originalLayersNames"].astype(str)) if "originalLayersNames" in info else ""
                layers.append((int(str(info["execOrder"].astype(str))), names))
        seq: list[int] = []
        for _, names in sorted(layers):
            seq.extend(idx[x] for x in names.split(",") if x in idx and idx[x] not in seq)
        req = compiled.create_infer_request()
        req.infer(ov_inputs(compiled, feed))
        # nodes the plugin creates are named Type_<global counter>, which grows with every compile
        perf_seqs[name] = [AUTO_NAME.sub(r"\1_#", p.node_name) for p in req.get_profiling_info()]
        exec_seqs[name] = seq
        pos = {int(o): i for i, o in enumerate(order)}
        a = np.array([pos[o] for o in seq])
        pairs = len(a) * (len(a) - 1) // 2
        agree = sum(int((a[i + 1:] > a[i]).sum()) for i in range(len(a)))
        row[name] = {"read_keeps_written_order": read == [int(o) for o in order],
                     "read_order_is_file_order": read == list(range(n)),
                     "exec_layers": len(layers), "exec_ops_covered": len(seq),
                     "exec_pairs_in_written_order": agree / pairs if pairs else 1.0}
    first = next(iter(orders))
    row["exec_order_same_for_all_orders"] = all(exec_seqs[k] == exec_seqs[first] for k in orders)
    row["perf_count_sequence_same_for_all_orders"] = all(perf_seqs[k] == perf_seqs[first] for k in orders)
    return row


def round_trip(core, xml: Path, tmp: Path, time_limit: float) -> dict:
    result = optimize_model(xml, "peak-mem", "auto", time_limit=time_limit)
    out = tmp / "opt.xml"
    save_model(result.model, out, source_path=xml)
    imp = import_openvino(xml)
    feed, names = seeded_inputs(imp, 0), output_names(imp)
    ref = _run(core, core.read_model(str(xml)), "CPU", feed, names)
    ok, err = compare_outputs(ref, _run(core, core.read_model(str(out)), "CPU", feed, names))
    return {"outputs_equal": bool(ok), "max_abs_error": float(err), "outputs_informative": bool(outputs_informative(ref)),
            "method": result.report["method_used"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="*", default=None)
    parser.add_argument("--time-limit", type=float, default=2.0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    import openvino as ov

    core = openvino_core()
    register_cpu_alias(core)
    for d in ("CPU", "CPUB"):
        core.set_property(d, F32)
    xmls = sorted(CORPUS.glob("*.xml"))
    if args.models:
        xmls = [x for x in xmls if x.stem in args.models]
    rows = []
    for xml in xmls:
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            rows.append({"model": xml.stem, "affinity": affinity(core, xml, tmp), "order": op_order(core, xml, tmp),
                         "round_trip": round_trip(core, xml, tmp, args.time_limit)})
    aff = Table(title=f"per-op affinity through an IR (OpenVINO {ov.__version__}; HETERO:CPU,CPUB sub-models)")
    for col in ("model", "in memory", "save+read: ops w/ aff", "subm", "XML layer rt_info: ops w/ aff", "subm",
                "onnx-sched sidecar: subm", "outputs equal"):
        aff.add_column(col, justify="right")
    order = Table(title="op order of an IR: written in 3 topological orders (file, random, reverse)")
    for col in ("model", "ops", "read keeps order (file/random/reverse)", "exec order same", "PERF_COUNT seq same",
                "exec pairs in written order (file/random/reverse)", "round trip outputs equal"):
        order.add_column(col, justify="right")
    for r in rows:
        a, o, t = r["affinity"], r["order"], r["round_trip"]
        aff.add_row(r["model"], str(a["in_memory_submodels"]), str(a["saved_ops_with_affinity"]),
                    str(a["saved_submodels"]),
                    f"{a['xml_ops_with_affinity_after_read']} of {a['xml_layers_with_affinity']}",
                    str(a["xml_submodels"]), str(a["onnx_sched_submodels"]), str(a["onnx_sched_outputs_equal"]))
        keys = ("file", "random", "reverse")
        order.add_row(r["model"], str(o["ops"]), "/".join(str(o[k]["read_keeps_written_order"]) for k in keys),
                      str(o["exec_order_same_for_all_orders"]), str(o["perf_count_sequence_same_for_all_orders"]),
                      "/".join(f"{o[k]['exec_pairs_in_written_order']:.3f}" for k in keys),
                      f"{t['outputs_equal']} ({t['max_abs_error']:.2g})")
    console = Console(width=200)
    console.print(aff)
    console.print(order)
    if args.out:
        args.out.write_text(json.dumps({"openvino": ov.__version__, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
