"""Commands never write over what they read, and models with external data are written so that
onnx.checker and ONNX Runtime accept them (onnx_sched.exporters.paths, save_model_atomic)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from conftest import assert_bitwise_equal, branchy_model, external_data_model, run_ort

from onnx_sched.exporters.paths import check_output_paths, model_files

EXE = [sys.executable, "-m", "onnx_sched.cli.__main__"]


def run_cli(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([*EXE, *map(str, args)], capture_output=True, text=True, timeout=300)


def _one_line_error(res: subprocess.CompletedProcess) -> str:
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    return lines[0]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_model_files_names_the_external_data():
    assert [p.name for p in model_files("missing.onnx")] == ["missing.onnx"]


def test_model_files_of_an_onnx_model_with_external_data(tmp_path):
    src = external_data_model(tmp_path)
    assert [p.name for p in model_files(src)] == ["m.onnx", "m.weights"]


def test_model_files_parses_a_model_only_when_its_bytes_mention_external_data(tmp_path):
    src = external_data_model(tmp_path)
    inline = onnx.load(str(src))  # the weights read in
    inline.doc_string = "no external data here, only the word location"
    onnx.save_model(inline, str(tmp_path / "inline.onnx"))
    assert [p.name for p in model_files(tmp_path / "inline.onnx")] == ["inline.onnx"]  # parsed: no reference
    inline.doc_string = ""
    onnx.save_model(inline, str(tmp_path / "plain.onnx"))
    assert b"location" not in (tmp_path / "plain.onnx").read_bytes()
    assert [p.name for p in model_files(tmp_path / "plain.onnx")] == ["plain.onnx"]
    (tmp_path / "empty.onnx").write_bytes(b"")
    assert [p.name for p in model_files(tmp_path / "empty.onnx")] == ["empty.onnx"]


@pytest.mark.parametrize("flag", ["--report", "--plot"])
def test_optimize_refuses_a_report_or_plot_over_the_input(tmp_path, flag):
    src = external_data_model(tmp_path / "in")
    before = _snapshot(src.parent)
    for victim in (src, src.parent / "m.weights"):
        line = _one_line_error(run_cli("optimize", src, "-o", tmp_path / "out.onnx", flag, victim))
        assert f"{flag} {victim}: is an input file" in line
    assert _snapshot(src.parent) == before
    assert not (tmp_path / "out.onnx").exists()


def test_optimize_refuses_the_model_over_its_own_external_data(tmp_path):
    src = external_data_model(tmp_path)
    before = _snapshot(tmp_path)
    line = _one_line_error(run_cli("optimize", src, "-o", tmp_path / "m.weights", "--method", "dfs"))
    assert "is an input file" in line
    assert _snapshot(tmp_path) == before


def test_optimize_refuses_two_outputs_on_one_path_and_an_output_under_a_file(tmp_path):
    src = external_data_model(tmp_path / "in")
    out = tmp_path / "out.onnx"
    assert "is also the path of -o" in _one_line_error(run_cli("optimize", src, "-o", out, "--report", out))
    (tmp_path / "afile").write_text("x")
    line = _one_line_error(run_cli("optimize", src, "-o", out, "--report", tmp_path / "afile" / "r.json"))
    assert "is not a directory" in line
    assert not out.exists()


def test_external_data_is_copied_not_linked_and_the_output_checks(tmp_path):
    """Written to another folder, the model gets its own copy of the weights: onnx.checker rejects
    hard-linked data, and a link would let a later write to either file change both."""
    src = external_data_model(tmp_path / "in")
    out = tmp_path / "out" / "m.sched.onnx"
    res = run_cli("optimize", src, "-o", out, "--method", "dfs")
    assert res.returncode == 0, res.stderr
    copied, original = out.parent / "m.weights", src.parent / "m.weights"
    assert copied.read_bytes() == original.read_bytes()
    assert os.stat(copied).st_nlink == 1 and os.stat(original).st_nlink == 1
    onnx.checker.check_model(str(out))
    assert_bitwise_equal(run_ort(str(src)), run_ort(str(out)))
    assert oct(out.stat().st_mode & 0o777) == oct(0o666 & ~_umask())  # as a plain open() would make it
    res = run_cli("optimize", src, "-o", out, "--method", "dfs")  # again: the same bytes are kept
    assert res.returncode == 0, res.stderr


def test_a_different_weights_file_in_the_output_folder_is_never_replaced(tmp_path):
    src = external_data_model(tmp_path / "in")
    stranger = tmp_path / "out" / "m.weights"
    stranger.parent.mkdir()
    stranger.write_bytes(b"someone else's weights")
    line = _one_line_error(run_cli("optimize", src, "-o", tmp_path / "out" / "m.onnx", "--method", "dfs"))
    assert "exists and holds other data" in line
    assert stranger.read_bytes() == b"someone else's weights"
    assert not (tmp_path / "out" / "m.onnx").exists()


def test_profile_and_bench_placement_refuse_to_write_over_their_inputs(tmp_path):
    src = tmp_path / "m.onnx"
    onnx.save(branchy_model(n=16), str(src))
    placement = tmp_path / "p.json"
    placement.write_text("{}")
    before = _snapshot(tmp_path)
    assert "is an input file" in _one_line_error(run_cli("profile", src, "--runtime", "ort", "-o", src))
    line = _one_line_error(run_cli("bench-placement", src, "--runtime", "ort", "--placement", placement,
                                   "--save-placement", placement))
    assert "--save-placement" in line and "is an input file" in line
    assert _snapshot(tmp_path) == before


def test_check_output_paths_sees_through_links(tmp_path):
    src = tmp_path / "m.onnx"
    src.write_bytes(b"model")
    (tmp_path / "alias.onnx").symlink_to(src)
    os.link(src, tmp_path / "hard.onnx")
    for alias in ("alias.onnx", "hard.onnx"):
        with pytest.raises(ValueError, match="is an input file"):
            check_output_paths([src], {"-o": tmp_path / alias})
    check_output_paths([src], {"-o": tmp_path / "new.onnx", "--report": None})


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_ort_graph_of_a_model_with_external_data(tmp_path):
    """ORT's optimized graph keeps references into the input's weights file; the written model gets its
    own copy beside it and runs like the input."""
    src = external_data_model(tmp_path / "in")
    out = tmp_path / "out" / "m.onnx"
    res = run_cli("optimize", src, "-o", out, "--ort-graph", "basic", "--method", "dfs")
    assert res.returncode == 0, res.stderr
    onnx.checker.check_model(str(out))
    assert (out.parent / "m.weights").read_bytes() == (src.parent / "m.weights").read_bytes()
    assert_bitwise_equal(run_ort(str(src)), run_ort(str(out)))


def test_no_output_lands_where_the_weights_are_copied(tmp_path):
    """Written to out/, the model's weights go to out/m.weights: neither -o, --report nor --plot may
    take that path (the report would overwrite the copied weights)."""
    src = external_data_model(tmp_path / "in")
    target = tmp_path / "out" / "m.weights"
    for flag in ("--report", "--plot"):
        line = _one_line_error(run_cli("optimize", src, "-o", tmp_path / "out" / "m.onnx", flag, target))
        assert f"{flag} {target}: is where the written model's external data goes" in line
    assert not (tmp_path / "out").exists()
    from onnx_sched.exporters.onnx import save_model_atomic

    with pytest.raises(ValueError, match="is where the written model's external data goes"):
        save_model_atomic(onnx.load(str(src), load_external_data=False), target, source_path=src)


def test_a_link_to_the_input_weights_is_replaced_by_a_copy(tmp_path):
    """onnx.checker rejects linked external data; a symbolic link to the input's weights where the
    copy goes is replaced (the input's file untouched), so the output loads."""
    src = external_data_model(tmp_path / "in")
    out = tmp_path / "out" / "m.onnx"
    out.parent.mkdir()
    (out.parent / "m.weights").symlink_to(src.parent / "m.weights")
    res = run_cli("optimize", src, "-o", out, "--method", "dfs")
    assert res.returncode == 0, res.stderr
    assert not (out.parent / "m.weights").is_symlink() and (src.parent / "m.weights").is_file()
    assert (out.parent / "m.weights").read_bytes() == (src.parent / "m.weights").read_bytes()
    onnx.checker.check_model(str(out))


def test_a_missing_weights_file_is_reported_before_anything_is_written(tmp_path):
    src = external_data_model(tmp_path / "in")
    model = onnx.load(str(src), load_external_data=False)
    model.graph.initializer[1].external_data[0].value = "other.weights"  # w2 now lives in a missing file
    from onnx_sched.exporters.onnx import save_model_atomic

    with pytest.raises(ValueError, match="other.weights referenced by the model is missing"):
        save_model_atomic(model, tmp_path / "out" / "m.onnx", source_path=src)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
