"""``onnx-sched train``: train a learned pass (needs the ``[train]`` extra, i.e. torch).

Sub-commands: ``peak-mem`` (Topoformer + REINFORCE on layered graphs,
:mod:`onnx_sched.models.training.train_peakmem`), ``regal`` (REGAL's BRKGA policy for
``peak-mem-devices``, :mod:`onnx_sched.models.training.regal_train`), ``gflownet`` (paper 002's
conditional GFlowNet scheduler, :mod:`onnx_sched.models.training.gflownet_train`) and
``ppo-scheduler`` (its PPO baseline, :mod:`onnx_sched.models.training.ppo_scheduler`); ``makespan``
(paper 001's priority sampler, :mod:`onnx_sched.models.training.train_makespan`) and ``hsdag`` (paper 004's
placer, :mod:`onnx_sched.models.training.hsdag_train`) pass their arguments on to those modules.  torch is imported
inside the commands, so the CLI itself works without it.

Example::

    onnx-sched train peak-mem --out-dir runs/peakmem --variant paper001 \\
        --epochs 60 --time-budget 2400 --export models/topoformer_peakmem
    onnx-sched train peak-mem --out-dir runs/peakmem --resume      # continue after an interruption
    onnx-sched train peak-mem --out-dir runs/ft --init-from models/checkpoints/topoformer_peakmem.pt --lr 3e-4  # fine-tune
    onnx-sched train peak-mem --out-dir runs/im --objective imitation --expert-workers 2 \
        --init-from models/checkpoints/topoformer_peakmem.pt     # imitate approximate-DP orders (built once, cached)

    onnx-sched train peak-mem --out-dir runs/avg --init-from models/checkpoints/topoformer_peakmem.pt --lr 3e-5 \
        --batch-graphs 8 --ema-decay 0.995      # small steps, keep a moving average of the weights

    onnx-sched train regal --minutes 35 --export runs/regal/regal              # REGAL (paper 003)
    onnx-sched train gflownet --updates 2000 --hours 0.45                      # GFlowNet (paper 002)

No trainer writes over the shipped checkpoints unless ``--export models/checkpoints/...`` says so:
the default exports go under ``runs/``.

Every trainer runs data-parallel under torchrun (:mod:`onnx_sched.models.training.distributed`:
graphs sharded by rank, gradients summed over the ranks, rank 0 validates, logs, checkpoints and
exports; gloo on CPU, NCCL with CUDA)::

    torchrun --nproc_per_node 2 -m onnx_sched.cli train peak-mem --out-dir runs/peakmem

The shipped Topoformer checkpoint's full recipe (REINFORCE, then imitation, then REINFORCE at
temperature 0.3, then low-learning-rate REINFORCE with a moving average) is in
``models/checkpoints/topoformer_peakmem.md``.
"""

from __future__ import annotations

from pathlib import Path

import click

from onnx_sched.errors import OnnxSchedError


def _families(text: str) -> tuple[str, ...]:
    """``er,layered`` -> ``("er", "layered")``; unknown names fail with the list of families."""
    from onnx_sched.synth import FAMILIES

    names = tuple(f.strip() for f in text.split(",") if f.strip())
    unknown = [f for f in names if f not in FAMILIES]
    if not names or unknown:
        raise click.BadParameter(f"unknown graph family {', '.join(unknown) or text!r}; choose from {', '.join(FAMILIES)}")
    return names


def _check_sizes(low: object, high: object) -> None:
    """``--min-ops`` above ``--max-ops`` (either may be unset: the trainer's default)."""
    if isinstance(low, int) and isinstance(high, int) and low > high:
        raise click.BadParameter(f"--min-ops {low} is above --max-ops {high}")


def _need_torch() -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        raise OnnxSchedError("training needs torch: pip install 'onnx-sched[train]'") from None


@click.group("train")
def command() -> None:
    """Train a learned pass (needs torch: the [train] extra)."""


@command.command("peak-mem")
@click.option("--out-dir", default="runs/peakmem", show_default=True, help="Checkpoint, log.jsonl and config go here.")
@click.option("--variant", type=click.Choice(["paper000", "paper001", "rollout+lognorm"]), default="paper001", show_default=True,
              help="paper000: greedy-rollout baseline + standardised logits; paper001: cost standardisation + logit-norm penalty.")
@click.option("--encoder", type=click.Choice(["topoformer", "dag", "mlp"]), default="topoformer", show_default=True)
@click.option("--epochs", type=click.IntRange(min=1), default=None, help="Epochs (default 30).")
@click.option("--steps-per-epoch", type=click.IntRange(min=1), default=None, help="Updates per epoch (default 40).")
@click.option("--batch-graphs", type=click.IntRange(min=1), default=None, help="Graphs per update (default 4).")
@click.option("--samples", type=click.IntRange(min=1), default=None, help="Sampled orders per graph (default 16).")
@click.option("--min-ops", type=click.IntRange(min=1), default=None, help="Smallest training graph (default 100).")
@click.option("--max-ops", type=click.IntRange(min=1), default=None, help="Largest training graph after the curriculum ramp (default 300).")
@click.option("--val-graphs", type=click.IntRange(min=1), default=None, help="Validation graphs (default 16).")
@click.option("--val-ops", type=click.IntRange(min=1), default=None, help="Validation graph size (default 300).")
@click.option("--reference-beam", type=click.IntRange(min=1), default=None, help="Width of the 'beam' pass used as validation reference (default 64).")
@click.option("--val-samples", type=click.IntRange(min=0), default=None, help="Validate by best of greedy + this many samples (default 0: greedy).")
@click.option("--val-temperature", type=float, default=None, help="Temperature of the validation samples (default 1).")
@click.option("--lr", type=float, default=None, help="Adam learning rate (default 1e-3).")
@click.option("--lr-decay", type=float, default=None, help="Learning-rate factor per epoch (default 0.97).")
@click.option("--init-from", default=None, help="Fine-tune: start from the weights of an exported STEM.pt, fresh optimizer.")
@click.option("--d-model", type=click.IntRange(min=1), default=None, help="Embedding width (default 64).")
@click.option("--layers", "n_layers", type=click.IntRange(min=1), default=None, help="Encoder layers (default 3).")
@click.option("--heads-per-group", type=click.IntRange(min=1), default=None, help="Attention heads per relation graph (default 1).")
@click.option("--ffn-dim", type=click.IntRange(min=1), default=None, help="Node MLP hidden width (default 128).")
@click.option("--objective", "objective_", type=click.Choice(["reinforce", "imitation"]), default=None,
              help="reinforce (default): paper 000/001 REINFORCE; imitation: maximise the likelihood of approximate-DP orders.")
@click.option("--expert-width", type=click.IntRange(min=1), default=None, help="Imitation: beam width of the demonstration orders (default 10000).")
@click.option("--expert-graphs", type=click.IntRange(min=1), default=None, help="Imitation: number of demonstration graphs (default 2400).")
@click.option("--expert-dir", default=None, help="Imitation: demonstration cache directory (default runs/experts).")
@click.option("--expert-workers", type=click.IntRange(min=1), default=None, help="Imitation: processes building missing demonstrations (default 1).")
@click.option("--temperature", type=float, default=None, help="Policy logits = encoder output / T (default 1; exported with the model).")
@click.option("--mem-beta", type=float, default=None,
              help="> 0: train the memory-aware decoder (logits minus beta x live-memory change per step; default 0 = eq. 8).")
@click.option("--logit-reg", type=float, default=None, help="Logit-norm penalty (paper 001 eq. 12; variant default).")
@click.option("--ema-decay", type=float, default=None,
              help="> 0: validate and keep an exponential moving average of the weights, e.g. 0.99 (default 0: off).")
@click.option("--seed", type=click.IntRange(min=0), default=None,
              help="Seed for torch, numpy and graph draws (default 0).")
@click.option("--threads", type=click.IntRange(min=1), default=None, help="torch threads (default 1).")
@click.option("--time-budget", "time_budget_s", type=float, default=None, help="Stop after this many seconds of training (resumable).")
@click.option("--resume", is_flag=True, help="Continue from OUT_DIR/checkpoint.pt.")
@click.option("--export", "export_stem", default=None, help="After training write STEM.onnx and STEM.pt (best validation weights).")
@click.option("--export-only", is_flag=True, help="Skip training; export OUT_DIR/checkpoint.pt to --export.")
@click.option("--families", default=None,
              help="Training mixture: comma-separated `onnx-sched gen` families, taken in turn (default layered).")
@click.option("--val-families", default=None, help="Validation graphs' families, comma-separated (default layered).")
def peak_mem(out_dir: str, variant: str, encoder: str, resume: bool, export_stem: str | None,
             export_only: bool, **overrides: object) -> None:
    """Train the learned ordering policy for peak-mem on synthetic graphs (layered, or a --families mixture)."""
    _check_sizes(overrides.get("min_ops"), overrides.get("max_ops"))
    _need_torch()
    from pathlib import Path

    from onnx_sched.models.training.distributed import is_main
    from onnx_sched.models.training.peakmem_export import export_checkpoint
    from onnx_sched.models.training.train_peakmem import TrainConfig, train

    ckpt = Path(out_dir) / "checkpoint.pt"
    if export_only:
        if not export_stem:
            raise OnnxSchedError("--export-only needs --export STEM")
        if not ckpt.is_file():
            raise OnnxSchedError(f"no checkpoint at {ckpt}")
    else:
        kwargs = {k: v for k, v in overrides.items() if v is not None}
        if "objective_" in kwargs:
            kwargs["objective"] = kwargs.pop("objective_")
        for key in ("families", "val_families"):
            if key in kwargs:
                kwargs[key] = _families(str(kwargs[key]))
        cfg = TrainConfig.for_variant(variant, out_dir=out_dir, encoder=encoder, **kwargs)
        train(cfg, resume=resume, echo=click.echo)
    if export_stem and is_main():  # under torchrun, rank 0 writes the files
        onnx_path, pt_path = export_checkpoint(ckpt, export_stem)
        click.echo(f"wrote {onnx_path} and {pt_path}")


@command.command("regal")
@click.option("--minutes", type=click.FloatRange(min=0, min_open=True), default=35.0, show_default=True,
              help="Training time after building the problems.")
@click.option("--evaluations", type=click.IntRange(min=1), default=5000, show_default=True, help="Evaluation budget of REGAL and of BRKGA (o_s).")
@click.option("--validation-evaluations", type=click.IntRange(min=1), default=None,
              help="Budget on the validation problems (default: --evaluations; paper 003 trains with 1000 and "
                   "validates with 5000).")
@click.option("--validate-every", type=click.IntRange(min=1), default=100, show_default=True,
              help="Training steps between validations (the checkpoint kept is the best validated one).")
@click.option("--synthetic", type=click.IntRange(min=0), default=120, show_default=True, help="Synthetic training graphs (validation: a quarter).")
@click.option("--copies", type=click.IntRange(min=0), default=6, show_default=True, help="Noisy copies per training corpus model.")
@click.option("--min-ops", type=click.IntRange(min=1), default=50, show_default=True)
@click.option("--max-ops", type=click.IntRange(min=1), default=150, show_default=True)
@click.option("--samples", type=click.IntRange(min=1), default=4, show_default=True, help="Actions sampled per training step.")
@click.option("--lr", type=float, default=1e-3, show_default=True)
@click.option("--advantage", type=click.Choice(["learned", "leave-one-out"]), default="learned", show_default=True,
              help="learned: reward minus the baseline network's b(G) (paper 003, eq. 9); leave-one-out: minus the "
                   "mean reward of the step's other actions (same problem and seed; needs --samples 2 or more).")
@click.option("--anchor", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Weight of the KL divergence from the policy after imitation (summed over a graph's heads), "
                   "added to REINFORCE's loss to keep it near its start; 0: none (the paper).")
@click.option("--explore-temperature", type=click.FloatRange(min=0, min_open=True), default=1.0, show_default=True,
              help="REINFORCE samples its actions from softmax(logits / T): below 1 they stay near the mode action "
                   "inference takes; 1: the policy itself (the paper).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True, help="torch threads.")
@click.option("--pin/--no-pin", default=False, show_default=True,
              help="Hold the op with the most memory on device 0 (paper's symmetry breaking); stored in the ONNX metadata.")
@click.option("--seed-pool", type=click.IntRange(min=1), default=4, show_default=True,
              help="Seeds shared by a step's actions and o_s (o_s cached per problem and seed).")
@click.option("--imitation-steps", type=click.IntRange(min=0), default=4000, show_default=True,
              help="Cross-entropy steps toward the imitation target before REINFORCE (0: the paper's cold start).")
@click.option("--imitation-target", type=click.Choice(["prior", "best-known", "seeded"]), default="prior",
              show_default=True,
              help="prior: the hand-written feature prior; best-known: the action encoding a BRKGA run of "
                   "--reference-evaluations per training problem (regal.solution_action); seeded: the same run "
                   "started from the feature run's elites.")
@click.option("--reference-evaluations", type=click.IntRange(min=100), default=50_000, show_default=True,
              help="Budget of the BRKGA run that gives each training problem's best-known solution.")
@click.option("--references", type=click.IntRange(min=1), default=1, show_default=True,
              help="Best-known solutions per training problem (other seeds); several make one target whose "
                   "variance levels widen where they disagree.")
@click.option("--rounds", type=click.IntRange(0, 64), default=4, show_default=True,
              help="Message-passing rounds T of the GNN (paper 003's best model: 16).")
@click.option("--hidden", type=click.IntRange(1, 1024), default=32, show_default=True, help="GNN width.")
@click.option("--devices", type=click.IntRange(2, 8), default=2, show_default=True,
              help="Devices of every training problem; the checkpoint serves this count (the pass looks for "
                   "regal.onnx for 2, regal_d3.onnx for 3, ...).")
@click.option("--feature-evaluations", type=click.IntRange(min=1), default=100, show_default=True,
              help="Evaluations of the uniform BRKGA whose population gives the node features (paper 003: 400; "
                   "100 = one population); stored in the ONNX metadata, the pass runs the same.")
@click.option("--export", "export_stem", default="runs/regal/regal", show_default=True,
              help="Write STEM.onnx, STEM.pt and STEM_train_log.json.")
def regal(export_stem: str, **options: object) -> None:
    """Train REGAL's policy (paper 003) with REINFORCE on problems of --devices devices."""
    _check_sizes(options.get("min_ops"), options.get("max_ops"))
    _need_torch()
    from onnx_sched.models.training.distributed import is_main
    from onnx_sched.models.training.regal_train import RegalTrainConfig, export, train

    result = train(RegalTrainConfig(**options), echo=click.echo)
    if is_main():  # under torchrun, rank 0 writes the files
        paths = export(result, export_stem)
        click.echo("wrote " + ", ".join(str(p) for p in paths))


def _gflownet_problems(data: str, corpus: str | None, held_out: str, profiles: str, graphs: int, ops: int,
                       lanes: tuple[int, ...], seed: int) -> list:
    """Paper 002's training problems: synthetic ER + layered graphs, sub-graphs of real models, or one model."""
    from pathlib import Path

    from onnx_sched.models.training import gflownet_train as gt

    if data == "synthetic":
        return gt.synthetic_problems(("er", "layered"), ops, graphs, seed, lanes[0])
    if data == "model":  # paper 002, 5.1: train on the one graph that is scheduled
        if corpus is None or not Path(corpus).is_file():
            raise click.UsageError("--data model needs --corpus MODEL.onnx (one file)")
        problem = gt.model_problems([corpus], profiles)[0]
        return [gt.homogeneous_problem(problem.graph, problem.min_durations(), lanes[0])]
    if corpus is None:
        raise click.UsageError("--data corpus needs --corpus DIR (ONNX files)")
    skip = {name.strip() for name in held_out.split(",") if name.strip()}
    paths = [p for p in sorted(Path(corpus).glob("*.onnx")) if p.stem not in skip]
    if not paths:
        raise click.UsageError(f"no ONNX models left in {corpus} after --held-out")
    return gt.subgraph_problems(gt.model_problems(paths, profiles), graphs, seed, lanes=lanes)


_GFN_DATA = [
    click.option("--data", type=click.Choice(["synthetic", "corpus", "model"]), default="synthetic", show_default=True,
                 help="synthetic: ER + layered graphs of --ops ops (paper 002, 5.2); corpus: sub-graphs of 25-75 ops "
                      "of the models in --corpus (5.3); model: the one model --corpus names (5.1)."),
    click.option("--corpus", default=None, help="Folder of ONNX models (--data corpus) or one model (--data model)."),
    click.option("--held-out", default="", help="Comma-separated model names (file stems) never trained on."),
    click.option("--profiles", default=str(Path(__file__).resolve().parents[2] / "examples" / "profiles_cpu_igpu_dgpu.json"),
                 show_default="examples/profiles_cpu_igpu_dgpu.json of this checkout",
                 help="Measured profile whose CPU op times are the corpus durations."),
    click.option("--graphs", type=click.IntRange(min=1), default=1000, show_default=True, help="Training problems."),
    click.option("--ops", type=click.IntRange(min=1), default=50, show_default=True, help="Ops per synthetic graph."),
    click.option("--lanes", default="4", show_default=True, help="Identical devices; a list (2,4) draws per problem."),
    click.option("--updates", type=click.IntRange(min=1), default=1000, show_default=True),
    click.option("--hours", type=click.FloatRange(min=0), default=0.0, show_default=True,
                 help="Stop after this long (0: no limit)."),
    click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True),
    click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True, help="torch threads (1 is fastest here)."),
]


def _with(options):  # noqa: ANN001, ANN202
    def apply(fn):  # noqa: ANN001, ANN202
        for option in reversed(options):
            fn = option(fn)
        return fn

    return apply


@command.command("gflownet")
@_with(_GFN_DATA)
@click.option("--loss", type=click.Choice(["variance", "tb"]), default="variance", show_default=True,
              help="variance: paper 002's log-partition variance loss; tb: trajectory balance with a learned log Z.")
@click.option("--batch", type=click.IntRange(min=1), default=100, show_default=True, help="Trajectories per update.")
@click.option("--actions", type=click.Choice(["all", "local", "list", "finish"]), default="all", show_default=True,
              help="all: any ready op on any device (paper 002); local / list: an op only on a predecessor's device "
                   "or the device that frees first / would finish it first; finish: only the op is chosen, on the "
                   "device that would finish it first (ties: nearest its inputs); narrowed sets have one parent "
                   "per state (docs/results.md 16.3c-d, 16.3f).")
@click.option("--resume", is_flag=True, help="Continue from STEM.pt.")
@click.option("--init-from", default=None, help="Start from another run's STEM.pt weights (fine-tuning).")
@click.option("--export", "export_stem", default="runs/gflownet/gflownet_makespan", show_default=True,
              help="Write STEM.pt, STEM.onnx, STEM_head.onnx and STEM_log.json.")
def gflownet(data: str, corpus: str | None, held_out: str, profiles: str, graphs: int, ops: int, lanes: str,
             updates: int, hours: float, seed: int, threads: int, loss: str, batch: int, actions: str,
             resume: bool, init_from: str | None, export_stem: str) -> None:
    """Train the conditional GFlowNet scheduler (paper 002) for --method gflownet."""
    _need_torch()
    import torch

    from onnx_sched.models.training import gflownet_train as gt

    torch.set_num_threads(threads)
    Path(export_stem).parent.mkdir(parents=True, exist_ok=True)
    lane_counts = tuple(int(x) for x in lanes.split(","))
    problems = _gflownet_problems(data, corpus, held_out, profiles, graphs, ops, lane_counts, seed)
    cfg = gt.TrainConfig(n_ops=ops, n_graphs=graphs, lanes=lane_counts[0], updates=updates, hours=hours, seed=seed,
                         loss=loss, batch=batch, actions=actions)
    result = gt.train(cfg, problems, export_stem, echo=click.echo, resume=resume, init_from=init_from)
    click.echo(f"{result['updates']} updates in {result['seconds'] / 3600:.2f} h; wrote {export_stem}.onnx")


@command.command("ppo-scheduler")
@_with(_GFN_DATA)
@click.option("--export", "export_stem", default="runs/ppo/ppo_makespan", show_default=True)
def ppo_scheduler(data: str, corpus: str | None, held_out: str, profiles: str, graphs: int, ops: int, lanes: str,
                  updates: int, hours: float, seed: int, threads: int, export_stem: str) -> None:
    """Train the PPO baseline of paper 002 on the same environment (sampled by --method gflownet --option model=...)."""
    _need_torch()
    import torch

    from onnx_sched.models.training import ppo_scheduler as ppo

    torch.set_num_threads(threads)
    Path(export_stem).parent.mkdir(parents=True, exist_ok=True)
    lane_counts = tuple(int(x) for x in lanes.split(","))
    problems = _gflownet_problems(data, corpus, held_out, profiles, graphs, ops, lane_counts, seed)
    result = ppo.train_ppo(ppo.PPOConfig(updates=updates, hours=hours, seed=seed), problems, export_stem,
                           echo=click.echo)
    click.echo(f"{result['updates']} updates in {result['seconds'] / 3600:.2f} h; wrote {export_stem}.onnx")


_PASS_THROUGH = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []}


@command.command("makespan", context_settings=_PASS_THROUGH)
@click.pass_context
def makespan(ctx: click.Context) -> None:
    """Train paper 001's makespan priority sampler (the --method learned of makespan); options: --help."""
    _need_torch()
    from onnx_sched.models.training import train_makespan

    train_makespan.main(list(ctx.args), prog=ctx.command_path)


@command.command("hsdag", context_settings=_PASS_THROUGH)
@click.pass_context
def hsdag(ctx: click.Context) -> None:
    """Train paper 004's HSDAG placer (the --method hsdag of latency); options: --help."""
    _need_torch()
    from onnx_sched.models.training import hsdag_train

    raise SystemExit(hsdag_train.main(list(ctx.args), prog=ctx.command_path))
