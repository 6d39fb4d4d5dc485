"""The package layout: no import cycles, one pass folder per objective, a light install without torch."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import networkx as nx
import pytest
from conftest import BLOCK_TORCH, branchy_model

from onnx_sched.objectives import OBJECTIVES, get_objective

ROOT = Path(__file__).resolve().parents[1]
#: Package name -> folder, as installed (passes/ and models/ live at the top of the repository).
PACKAGES = {name: Path(importlib.import_module(name).__path__[0]) for name in ("onnx_sched", "onnx_sched.passes", "onnx_sched.models")}


def _modules() -> dict[str, Path]:
    """Every module of the library: dotted name -> file."""
    out: dict[str, Path] = {}
    for pkg, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            name = ".".join([pkg, *parts])
            if pkg == "onnx_sched" and parts and parts[0] in ("passes", "models"):
                continue  # not part of the onnx_sched folder in this layout
            out[name] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Modules of the library that ``name`` imports anywhere (functions included), except under TYPE_CHECKING."""
    tree = ast.parse(path.read_text(), filename=str(path))
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and _is_type_checking(node) for n in ast.walk(node)}
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.add(target if target in known else base)
    return {m for m in found if m in known and m != name}


def import_graph() -> nx.DiGraph:
    mods = _modules()
    g = nx.DiGraph()
    g.add_nodes_from(mods)
    for name, path in mods.items():
        g.add_edges_from((name, dep) for dep in _imports(name, path, set(mods)))
    return g


def test_the_library_has_no_import_cycle() -> None:
    g = import_graph()
    assert g.number_of_nodes() > 100 and g.number_of_edges() > 200  # the walker sees the real package
    cycles = [sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1]
    assert not cycles, f"import cycles: {cycles}"


def test_the_cycle_walker_finds_a_cycle(tmp_path) -> None:
    """The walker is not blind: two modules importing each other (one lazily) form a cycle."""
    a, b = tmp_path / "a.py", tmp_path / "b.py"
    a.write_text("from pkg import b\n")
    b.write_text("def f():\n    from pkg.a import x\n")
    known = {"pkg.a", "pkg.b"}
    assert _imports("pkg.a", a, known) == {"pkg.b"} and _imports("pkg.b", b, known) == {"pkg.a"}


def test_cost_models_do_not_import_passes_objectives_or_models() -> None:
    g = import_graph()
    lower = [m for m in g if m.startswith(("onnx_sched.cost", "onnx_sched.graph", "onnx_sched.dag", "onnx_sched.importers"))]
    for mod in lower:
        bad = [d for d in nx.descendants(g, mod) if d.startswith(("onnx_sched.passes", "onnx_sched.objectives", "onnx_sched.models"))]
        assert not bad, f"{mod} reaches {bad}"


def test_inference_never_imports_training() -> None:
    g = import_graph()
    for mod in g:
        if not mod.startswith("onnx_sched.models.training") and mod != "onnx_sched.cli.train":
            reached = [d for d in nx.descendants(g, mod) if d.startswith("onnx_sched.models.training")]
            assert not reached, f"{mod} reaches training code {reached}"


def test_passes_have_one_folder_per_objective() -> None:
    from onnx_sched.passes import _FAILED, _REGISTRY, _load, available

    for objective in OBJECTIVES:
        assert available(objective), objective
    _load()  # every folder, so a pass registered in another objective's folder would show up
    assert not _FAILED, _FAILED  # the full install loads every pass module
    for objective in OBJECTIVES:
        folders = {fn.__module__.split(".")[2] for (o, _), fn in _REGISTRY.items() if o == objective}
        assert folders == {get_objective(objective).pass_folder}, (objective, folders)
    assert len({get_objective(o).pass_folder for o in OBJECTIVES}) == len(OBJECTIVES)  # no two objectives share one
    assert not [p for p in PACKAGES["onnx_sched.passes"].glob("*.py") if p.name != "__init__.py"]  # no loose pass files


def test_a_command_imports_only_its_objectives_passes() -> None:
    """optimize --objective peak-mem loads passes/order only: not pymoo (GA) nor the placement passes."""
    code = ("import sys; from onnx_sched.passes import available; available('peak-mem'); "
            "print(sorted({m.split('.')[2] for m in sys.modules if m.startswith('onnx_sched.passes.')}), "
            "'pymoo' in sys.modules)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split() == ["['order']", "False"]


def test_pyproject_lists_every_package() -> None:
    """A non-editable install ships exactly the packages pyproject names."""
    tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11's; the package itself runs on 3.10")

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {name for name, path in _modules().items() if path.name == "__init__.py"}
    assert found == listed, f"missing {found - listed}, stale {listed - found}"


def test_no_library_module_is_long_without_a_reason() -> None:
    """Modules over ~500 lines say why in their docstring (a line with 'long because')."""
    long = [name for name, path in _modules().items()
            if len(path.read_text().splitlines()) > 520 and "long because" not in (ast.get_docstring(ast.parse(path.read_text())) or "")]
    assert not long, long


@pytest.mark.parametrize("objective", OBJECTIVES)
def test_every_objective_implements_the_interface(objective) -> None:
    obj = get_objective(objective)
    assert obj.name == objective
    for method in ("build_problem", "warm_up_instance", "check", "evaluate", "baseline", "report", "metadata", "table",
                   "plot"):
        assert callable(getattr(obj, method)), method
    assert isinstance(obj.pass_folder, str) and isinstance(obj.plots, bool)


def test_light_install_imports_no_torch(tmp_path) -> None:
    """Every CLI command, every pass and one learned pass per objective run with torch blocked."""
    import onnx

    model = tmp_path / "m.onnx"
    onnx.save(branchy_model(), model)
    code = BLOCK_TORCH + textwrap.dedent(
        f"""
        from click.testing import CliRunner
        from onnx_sched.cli import main
        from onnx_sched.passes import _FAILED, available
        from onnx_sched.objectives import OBJECTIVES
        names = {{o: available(o) for o in OBJECTIVES}}
        runner = CliRunner()
        root = {str(ROOT)!r}
        for extra in (["--objective", "peak-mem", "--method", "learned", "--samples", "4"],
                      ["--objective", "makespan", "--method", "learned", "--machines", root + "/examples/machines_3types.json"],
                      ["--objective", "makespan", "--method", "gflownet", "--machines",
                       root + "/examples/machines_cpu_igpu_dgpu.json", "--candidates", "50", "--target", "bandwidth"],
                      ["--objective", "latency", "--method", "hsdag", "--profiles", root + "/examples/profiles_cpu_igpu_dgpu.json",
                       "--option", "episodes=2"],
                      ["--objective", "peak-mem", "--devices", "CPU,GPU", "--method", "regal", "--option", "evaluations=500"]):
            res = runner.invoke(main, ["optimize", {str(model)!r}, "-o", {str(tmp_path / "out.onnx")!r}, *extra])
            assert res.exit_code == 0, (extra, res.output, res.exception)
        assert "torch" not in sys.modules
        assert not [m for m in sys.modules if m.startswith("onnx_sched.models.training")]
        print(json.dumps({{"failed": _FAILED, "methods": names}}))
        """
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert not out["failed"], out["failed"]  # no pass module needed torch
    assert "learned" in out["methods"]["peak-mem"] and "hsdag" in out["methods"]["latency"]
    assert "regal" in out["methods"]["peak-mem-devices"]
