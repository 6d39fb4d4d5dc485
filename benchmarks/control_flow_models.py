"""Random ONNX models with nested control flow, for ``unseen_models.py`` / ``unseen_commands.py --source
control-flow-random``.

onnx's node test cases (``--source control-flow``) hold one control-flow op each, with tiny bodies.  Real models
nest them (a merged decoder's ``If`` around a whole decoder, a scripted ``Loop`` around a ``Scan``) and mix them
with plain ops.  Each model here is drawn from a seed: a main graph of 2-9 random blocks over two ``[N, 8]`` float
inputs and a bool ``cond``; a block is a plain op (``Add``, ``Mul``, ``Relu``, ``Identity``, a ``Constant``, an
initializer, a ``Tile`` + ``ReduceMax`` that makes a large temporary, ``Concat`` + ``Slice``, ``Split`` +
``Concat``) or, up to two levels deep, a control-flow op:

* ``If`` on ``cond`` with two random branches of one or two outputs, reading outer values by name;
* ``Loop`` with a constant trip count (1-3), one carried value, sometimes a scan output (reduced after it);
* ``Scan`` over the rows of a value, with a state, its body row-wise ops only.

Bodies hold their own initializers and ``Constant`` nodes and read outer values, so the cases cover a body output
made from constants alone, a scan output stacked over a loop and a loop inside a branch.  Every model passes
``onnx.checker`` (full check) and runs in ONNX Runtime; seeds whose draw does not are skipped.  The feeds set
``cond`` to true; the other branch is what the tests of ``tests/test_control_flow.py`` check.

``build(folder, count)`` writes the first ``count`` valid models and returns ``(path, feeds, [])`` per model, as
``model_kinds.build`` does.

    python benchmarks/control_flow_models.py FOLDER [COUNT]    # writes the models, prints their names
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

F = T.FLOAT
#: Body nesting below the main graph (a branch of a branch of the main graph is depth 2).
MAX_DEPTH = 2


class _Draw:
    """One model's random draw: names, the row count ``n`` and the ops of every graph."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.n = int(self.rng.integers(2, 7))
        self.count = 0
        self.main_inits: list[onnx.TensorProto] = []  # small constants any graph may read (outer scope)

    def name(self, prefix: str = "t") -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def const(self, value: np.ndarray, inits: list[onnx.TensorProto], prefix: str = "k") -> str:
        name = self.name(prefix)
        inits.append(nh.from_array(value, name))
        return name

    def ops(self, values: list[str], nodes: list, inits: list, count: int, depth: int, rowwise: bool = False
            ) -> list[str]:
        """Append ``count`` random blocks reading ``values`` (all ``[n, 8]``, or ``[8]`` when ``rowwise``);
        returns ``values`` and the new ones."""
        r = self.rng
        values = list(values)
        shape = [8] if rowwise else [self.n, 8]
        for _ in range(count):
            kinds = ["add", "mul", "relu", "identity", "constant", "initializer", "large"]
            if not rowwise:
                kinds += ["concat_slice", "split"] + (["if", "if", "loop", "scan"] if depth < MAX_DEPTH else [])
            kind = str(r.choice(kinds))
            a, b = str(r.choice(values)), str(r.choice(values))
            label = "" if r.random() < 0.2 else self.name("n")
            out = self.name()
            if kind in ("add", "mul"):
                nodes.append(h.make_node(kind.capitalize(), [a, b], [out], name=label))
            elif kind in ("relu", "identity"):
                nodes.append(h.make_node(kind.capitalize(), [a], [out], name=label))
            elif kind == "constant":
                nodes.append(h.make_node("Constant", [], [out], value=nh.from_array(
                    r.standard_normal(shape).astype(np.float32))))
            elif kind == "initializer":
                out = self.const(r.standard_normal(shape).astype(np.float32), inits, "w")
            elif kind == "large":  # 64 copies, then the max over them, then b: a 64x temporary
                reps = self.const(np.array([64] if rowwise else [64, 1], np.int64), inits)
                axes = self.const(np.array([0], np.int64), inits)
                tiled, peak = self.name(), self.name()
                nodes += [h.make_node("Tile", [a, reps], [tiled]),
                          h.make_node("ReduceMax", [tiled, axes], [peak], keepdims=0 if rowwise else 1),
                          h.make_node("Add", [peak, b], [out])]
            elif kind == "concat_slice":
                start = int(r.integers(0, 8))
                both = self.name()
                ends = [self.const(np.array([v], np.int64), inits) for v in (start, start + 8, 1)]
                nodes += [h.make_node("Concat", [a, b], [both], axis=1), h.make_node("Slice", [both, *ends], [out])]
            elif kind == "split":
                left, right = self.name(), self.name()
                sizes = self.const(np.array([4, 4], np.int64), inits)
                nodes += [h.make_node("Split", [a, sizes], [left, right], axis=1, name=label),
                          h.make_node("Concat", [right, left], [out], axis=1)]
            else:
                values += {"if": self._if, "loop": self._loop, "scan": self._scan}[kind](values, nodes, depth)
                continue
            values.append(out)
        return values

    def body(self, formal: list, outer: list[str], n_out: int, depth: int, rowwise: bool = False,
             first_outputs: tuple = ()) -> onnx.GraphProto:
        """A body: ``formal`` inputs, up to two outer values read by name, random ops, ``n_out`` outputs (each
        through an ``Identity`` of its own), after ``first_outputs`` (a loop's condition)."""
        nodes: list = []
        inits: list = []
        own = [f.name for f in formal if f.type.tensor_type.elem_type == F]
        reads = [] if rowwise or not outer else [str(v) for v in self.rng.choice(outer, min(2, len(outer)), False)]
        values = self.ops(own + reads, nodes, inits, int(self.rng.integers(1, 6)), depth + 1, rowwise)
        made = values[len(own) + len(reads):] or values
        outputs = []
        for _ in range(n_out):
            source = str(self.rng.choice(made if self.rng.random() < 0.8 else values))
            outputs.append(self.name("out"))
            nodes.append(h.make_node("Identity", [source], [outputs[-1]]))
        shape = [8] if rowwise else [self.n, 8]
        return h.make_graph(nodes, self.name("body"), formal,
                            [*first_outputs, *(h.make_tensor_value_info(o, F, shape) for o in outputs)], inits)

    def _if(self, values: list[str], nodes: list, depth: int) -> list[str]:
        n_out = int(self.rng.integers(1, 3))
        branches = [self.body([], values, n_out, depth) for _ in range(2)]
        outs = [self.name() for _ in range(n_out)]
        nodes.append(h.make_node("If", ["cond"], outs, then_branch=branches[0], else_branch=branches[1],
                                 name=self.name("if")))
        return outs

    def _loop(self, values: list[str], nodes: list, depth: int) -> list[str]:
        trips = self.name("trips")
        nodes.append(h.make_node("Constant", [], [trips], value=nh.from_array(np.array(self.rng.integers(1, 4)))))
        step, cond, carried, cond_out = self.name("i"), self.name("c"), self.name("v"), self.name("c")
        formal = [h.make_tensor_value_info(step, T.INT64, []), h.make_tensor_value_info(cond, T.BOOL, []),
                  h.make_tensor_value_info(carried, F, [self.n, 8])]
        stacked = self.rng.random() < 0.4
        body = self.body(formal, values, 2 if stacked else 1, depth,
                         first_outputs=(h.make_tensor_value_info(cond_out, T.BOOL, []),))
        body.node.insert(0, h.make_node("Identity", [cond], [cond_out]))
        outs = [self.name() for _ in range(2 if stacked else 1)]
        nodes.append(h.make_node("Loop", [trips, "", str(self.rng.choice(values))], outs, body=body,
                                 name=self.name("loop")))
        if not stacked:
            return outs
        axes, total = self.const(np.array([0], np.int64), self.main_inits), self.name()
        nodes.append(h.make_node("ReduceSum", [outs[1], axes], [total], keepdims=0))  # [trips, n, 8] -> [n, 8]
        return [outs[0], total]

    def _scan(self, values: list[str], nodes: list, depth: int) -> list[str]:
        start = self.name("s")
        nodes.append(h.make_node("Constant", [], [start], value=nh.from_array(
            self.rng.standard_normal(8).astype(np.float32))))
        state, row = self.name("s"), self.name("row")
        body = self.body([h.make_tensor_value_info(state, F, [8]), h.make_tensor_value_info(row, F, [8])], [], 2,
                         depth, rowwise=True)
        final, rows = self.name(), self.name()
        nodes.append(h.make_node("Scan", [start, str(self.rng.choice(values))], [final, rows], body=body,
                                 num_scan_inputs=1, name=self.name("scan")))
        return [rows]


def random_model(seed: int) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The model drawn from ``seed`` and its feeds (seeded normal inputs, ``cond`` true)."""
    draw = _Draw(seed)
    nodes: list = []
    inits: list = []
    values = draw.ops(["x0", "x1"], nodes, inits, int(draw.rng.integers(2, 10)), 0)
    outputs = list(dict.fromkeys([values[-1], *(str(v) for v in draw.rng.choice(values[2:] or values,
                                                                                 int(draw.rng.integers(0, 3))))]))
    n = draw.n
    graph = h.make_graph(nodes, f"control_flow_{seed}",
                         [h.make_tensor_value_info(x, F, [n, 8]) for x in ("x0", "x1")]
                         + [h.make_tensor_value_info("cond", T.BOOL, [])],
                         [h.make_tensor_value_info(o, F, [n, 8]) for o in outputs], [*inits, *draw.main_inits])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
    model.ir_version = 10
    feeds = {x: np.random.default_rng([seed, i]).standard_normal((n, 8)).astype(np.float32)
             for i, x in enumerate(("x0", "x1"))}
    return model, {**feeds, "cond": np.array(True)}


def build(out: Path, count: int = 40) -> list[tuple[Path, dict[str, np.ndarray], list[str]]]:
    """Write the first ``count`` valid models (seeds 0, 1, ...) to ``out``; ``(path, feeds, [])`` each."""
    import onnxruntime as ort

    out.mkdir(parents=True, exist_ok=True)
    options = ort.SessionOptions()
    options.log_severity_level = 3  # initializers no op reads (a draw's leftovers) are warned about, not wrong
    built = []
    seed = 0
    while len(built) < count and seed < 10 * count:
        model, feeds = random_model(seed)
        seed += 1
        try:
            onnx.checker.check_model(model, full_check=True)
            session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
            session.run(None, feeds)
        except Exception:  # noqa: BLE001 -- a draw onnx or ONNX Runtime refuses: not a test case
            continue
        path = out / f"{model.graph.name}.onnx"
        onnx.save(model, path)
        built.append((path, feeds, []))
    return built


if __name__ == "__main__":
    for path, _, _ in build(Path(sys.argv[1] if len(sys.argv) > 1 else "control_flow_models"),
                            int(sys.argv[2]) if len(sys.argv) > 2 else 40):
        print(path)
