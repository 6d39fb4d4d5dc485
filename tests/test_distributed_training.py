"""Every trainer on torch.distributed: 2 CPU processes (gloo) launched by torchrun, as the README's command.

One launch (``python -m torch.distributed.run --nproc_per_node 2``, this file as the script) trains
each trainer for a few updates on tiny graphs and saves every rank's final weights; the tests compare
them.  Peak-mem also resumes (1 epoch, then a resumed 2nd) and must equal a plain 1-process run of
2 epochs over the same graphs: each graph's samples are seeded by its index in the run, and the summed
gradient of the 2 ranks is the 1-process mean up to float reassociation.  Tolerance ``rtol=1e-5,
atol=1e-6`` (observed: bitwise equal with one graph per rank per update, where the sum of two terms
does not reassociate; ~1e-8 after one update with two graphs per rank).  Over several updates with
several graphs per rank the runs drift apart by more (2e-4 after two updates): Adam divides by the
gradient's own size, so gradients that are zero but for rounding (the attention keys' bias, which the
softmax ignores) take rounding-sized steps in different directions; that comparison is one update.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
RTOL, ATOL = 1e-5, 1e-6


def _peak_config(out_dir: Path, **changes):
    from onnx_sched.models.training.train_peakmem import TrainConfig

    # 2 graphs per update, one per rank; paper000's rollout baseline is chosen by rank 0 and broadcast
    return TrainConfig.for_variant(
        "paper000", **{"out_dir": str(out_dir), "d_model": 16, "n_layers": 1, "epochs": 1, "steps_per_epoch": 2,
                       "batch_graphs": 2, "samples": 4, "min_ops": 20, "max_ops": 30, "val_graphs": 1, "val_ops": 30,
                       "reference_beam": 4, "lr": 1e-2, **changes},
    )


#: one update of 4 graphs, 2 per rank
FOUR = {"steps_per_epoch": 1, "batch_graphs": 4}


def _worker(tmp: Path) -> None:
    """One rank of the torchrun launch: train each trainer briefly, save this rank's weights."""
    import conftest
    import onnx

    from onnx_sched.models.training import (
        distributed,
        hsdag_train,
        regal_data,
        regal_train,
        train_makespan,
        train_peakmem,
    )

    world = distributed.setup()
    assert world.size == 2 and world.backend == "gloo", world
    out: dict[str, dict] = {}
    cfg = _peak_config(tmp / "peak")
    train_peakmem.train(cfg, echo=lambda s: None)
    st = train_peakmem.train(replace(cfg, epochs=2), resume=True, echo=lambda s: None)
    out["peak_mem"] = {"model": st["model"], "epoch": st["epoch"], "step": st["step"]}
    out["peak_mem_four"] = train_peakmem.train(_peak_config(tmp / "four", **FOUR), echo=lambda s: None)["model"]
    # 3 training graphs over 2 ranks: rank 1 joins the 2nd update of each epoch with no graph
    mcfg = train_makespan.TrainConfig(out_dir=str(tmp / "makespan"), families=("layered", "er", "sbm"), n_ops=30,
                                      train_graphs=1, val_graphs=1, samples=8, epochs=1, d_model=16, n_layers=1,
                                      ffn_dim=32, threads=1, val_samples=4)
    out["makespan"] = train_makespan.train(mcfg, echo=lambda s: None)["state"]
    corpus = tmp / "corpus"
    if world.rank == 0:
        corpus.mkdir()
        onnx.save(conftest.branchy_model(3, 64), corpus / "b3.onnx")
        onnx.save(conftest.branchy_model(2, 64), corpus / "b2.onnx")
    distributed.barrier()
    hsdag_train.CORPUS = corpus
    out["hsdag"] = hsdag_train.train(0.01, tmp / "hsdag", batch=4, models=("b3", "b2"), imitation_minutes=0.005)["state"]
    regal_data.TRAIN_CORPUS = regal_data.VALIDATION_CORPUS = ()  # synthetic graphs only
    rcfg = regal_train.RegalTrainConfig(minutes=0.01, evaluations=500, synthetic=4, copies=0, min_ops=10, max_ops=20,
                                        samples=2, validate_every=1000)
    res = regal_train.train(rcfg, echo=lambda s: None)
    out["regal"] = {**{f"policy.{k}": v for k, v in res["last_policy"].items()},
                    **{f"baseline.{k}": v for k, v in res["baseline"].state_dict().items()}}
    out["regal_steps"] = res["summary"]["steps"]
    torch.save(out, tmp / f"rank{world.rank}.pt")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory) -> tuple[Path, list[dict]]:
    tmp = tmp_path_factory.mktemp("distributed")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(_free_port()),
           __file__, str(tmp)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    assert res.returncode == 0, (res.stdout[-3000:], res.stderr[-5000:])
    return tmp, [torch.load(tmp / f"rank{r}.pt", weights_only=False) for r in (0, 1)]


def _assert_equal_states(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_distributed_peak_mem_two_ranks_equal_one_process(two_ranks, tmp_path) -> None:
    from onnx_sched.models.training.train_peakmem import train

    tmp, ranks = two_ranks
    _assert_equal_states(ranks[0]["peak_mem"]["model"], ranks[1]["peak_mem"]["model"])
    _assert_equal_states(ranks[0]["peak_mem_four"], ranks[1]["peak_mem_four"])
    assert ranks[0]["peak_mem"]["epoch"] == 2 and ranks[0]["peak_mem"]["step"] == 4
    # rank 0 validated, logged and checkpointed; the resumed run continued its log
    log = (tmp / "peak" / "log.jsonl").read_text().splitlines()
    assert len(log) == 2
    single = train(replace(_peak_config(tmp_path / "one"), epochs=2), echo=lambda s: None)  # no torchrun: world size 1
    assert single["step"] == 4
    moved = False
    for k, v in single["model"].items():
        np.testing.assert_allclose(ranks[0]["peak_mem"]["model"][k].numpy(), v.numpy(), rtol=RTOL, atol=ATOL, err_msg=k)
        moved |= not torch.equal(v, _initial_weights(tmp_path)[k])
    assert moved  # the updates did something
    four = train(_peak_config(tmp_path / "four", **FOUR), echo=lambda s: None)["model"]
    for k, v in four.items():
        np.testing.assert_allclose(ranks[0]["peak_mem_four"][k].numpy(), v.numpy(), rtol=RTOL, atol=ATOL, err_msg=k)


def _initial_weights(tmp_path: Path) -> dict:
    from onnx_sched.models.training.topoformer import Topoformer

    torch.manual_seed(0)
    return Topoformer(_peak_config(tmp_path).encoder_config()).state_dict()


@pytest.mark.parametrize("trainer", ["makespan", "hsdag", "regal"])
def test_distributed_every_trainer_ends_with_identical_weights_on_both_ranks(two_ranks, trainer: str) -> None:
    tmp, ranks = two_ranks
    _assert_equal_states(ranks[0][trainer], ranks[1][trainer])
    written = {"makespan": "makespan/sampler_makespan.onnx", "hsdag": "hsdag/hsdag_placer.onnx"}
    if trainer in written:  # rank 0 exported
        assert (tmp / written[trainer]).is_file()
    else:  # the ranks stopped together
        assert ranks[0]["regal_steps"] == ranks[1]["regal_steps"] > 0


def test_distributed_helpers_are_no_ops_in_one_process() -> None:
    from onnx_sched.models.training import distributed

    w = distributed.setup()
    assert (w.rank, w.size, w.backend) == (0, 1, "") and distributed.is_main()
    assert distributed.shard(range(5)) == [0, 1, 2, 3, 4]
    assert distributed.shard(range(5), 1, 2) == [1, 3] and distributed.shard_count(5, 1, 2) == 2
    assert distributed.rank_rng(3).integers(1000) == np.random.default_rng(3).integers(1000)
    p = torch.nn.Parameter(torch.ones(3))
    p.grad = torch.full((3,), 2.0)
    distributed.sum_gradients([p])
    assert torch.equal(p.grad, torch.full((3,), 2.0))
    assert distributed.sum_values([1.5]) == [1.5] and distributed.any_rank(True) and not distributed.any_rank(False)


if __name__ == "__main__":
    _worker(Path(sys.argv[1]))


@pytest.mark.parametrize(("gpus", "local", "expected"),
                         [(0, 2, "gloo"), (1, 2, "gloo"), (2, 2, "nccl"), (1, 1, "nccl")])
def test_default_backend_gives_each_nccl_rank_a_gpu(monkeypatch, gpus: int, local: int, expected: str) -> None:
    """NCCL only when every local process has a GPU of its own: two ranks on a one-GPU machine reduce with gloo."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpus > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(local))
    from onnx_sched.models.training import distributed

    assert distributed.default_backend() == expected
