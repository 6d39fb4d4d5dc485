"""Biased random-key genetic algorithm (BRKGA), objective-agnostic (paper 003, section 3.2).

A chromosome is a vector of keys in [0, 1]; a problem supplies only a batched
fitness function (lower is better) that decodes and scores chromosomes.  Each
generation keeps the ``elites`` best unchanged, breeds ``children`` by biased
crossover of one elite and one non-elite parent (gene ``i`` from the elite with
probability ``rho[i]``), and fills the rest with mutants drawn from the chromosome
distribution (independent Beta(alpha_i, beta_i) per gene; standard BRKGA: uniform
and one ``rho`` for all genes).  It stops when the next generation would exceed the
evaluation budget, at the deadline (no generation starts that would end past it, by the last one's time; the
first population stops being scored when it passes, after the known good chromosomes),
or (``settle``) once the best is as good as it
can be on the main objective and has stopped improving on what breaks its ties.

Per-gene distributions are what REGAL's policy predicts; :class:`GeneDistributions`
carries them.  Runs are deterministic for a given seed.

Example:
    >>> target = np.linspace(0, 1, 8)
    >>> result = brkga(lambda keys: np.abs(keys - target).sum(axis=1), 8, BrkgaParams(evaluations=3000), seed=1)
    >>> result.evaluations <= 3000, bool(result.best_fitness < 0.9)
    (True, True)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from onnx_sched.deadline import Deadline
from onnx_sched.jit import work_clock

__all__ = ["BrkgaParams", "BrkgaResult", "GeneDistributions", "Settle", "brkga"]


@dataclass(frozen=True)
class Settle:
    """Stop a search once its best fitness is at most ``at`` -- e.g. a proven lower bound of the main objective, so
    only a tie-break (bytes moved) can still improve -- and has not improved for ``patience`` rounds.

    >>> Settle(at=10.5, patience=3).done(best=10.2, flat=3), Settle(at=10.5, patience=3).done(best=11.0, flat=9)
    (True, False)
    """

    at: float
    patience: int

    def done(self, best: float, flat: int) -> bool:
        return best <= self.at and flat >= self.patience


@dataclass(frozen=True)
class BrkgaParams:
    """Population sizes and budget; the defaults are paper 003's BRKGA 5K (pi, pi_e, pi_c, rho)."""

    population: int = 100
    elites: int = 10
    children: int = 80
    elite_bias: float = 0.7
    evaluations: int = 5000

    def __post_init__(self) -> None:
        if not (1 <= self.elites < self.population and 0 <= self.children <= self.population - self.elites):
            raise ValueError(f"BRKGA needs 1 <= elites < population and children <= population - elites, got "
                             f"population={self.population}, elites={self.elites}, children={self.children}")
        if not 0.5 <= self.elite_bias <= 1.0:
            raise ValueError(f"elite bias must be in [0.5, 1], got {self.elite_bias}")
        if self.evaluations < self.population:
            raise ValueError(f"evaluation budget {self.evaluations} is below one population ({self.population})")

    @property
    def mutants(self) -> int:
        return self.population - self.elites - self.children

    def with_options(self, option: Callable[[str, Any], Any]) -> BrkgaParams:
        """These parameters with a pass's options (``population``, ``elites``, ``children``,
        ``elite_bias``, ``evaluations``) where given; ``option`` is ``PassContext.option``."""
        return BrkgaParams(
            population=int(option("population", self.population)),
            elites=int(option("elites", self.elites)),
            children=int(option("children", self.children)),
            elite_bias=float(option("elite_bias", self.elite_bias)),
            evaluations=int(option("evaluations", self.evaluations)),
        )


@dataclass(frozen=True)
class GeneDistributions:
    """Per-gene chromosome distribution Beta(alpha, beta) and elite bias rho."""

    alpha: np.ndarray
    beta: np.ndarray
    rho: np.ndarray

    @classmethod
    def uniform(cls, n_genes: int, elite_bias: float = 0.7) -> GeneDistributions:
        """Standard BRKGA: U[0, 1] = Beta(1, 1) per gene, one elite bias."""
        ones = np.ones(n_genes)
        return cls(alpha=ones, beta=ones, rho=np.full(n_genes, float(elite_bias)))

    def sample(self, rng: np.random.Generator, count: int) -> np.ndarray:
        return rng.beta(self.alpha, self.beta, size=(count, len(self.alpha)))


@dataclass(frozen=True)
class BrkgaResult:
    """The best chromosome found, the final population and how fitness improved."""

    best_keys: np.ndarray
    best_fitness: float
    evaluations: int
    generations: int
    population: np.ndarray  # final population, best first
    fitness: np.ndarray  # its fitness, ascending
    history: tuple[tuple[int, float], ...]  # (evaluations so far, best fitness) after each generation


def brkga(
    fitness: Callable[[np.ndarray], np.ndarray],
    n_genes: int,
    params: BrkgaParams = BrkgaParams(),
    distributions: GeneDistributions | None = None,
    *,
    seed: int = 0,
    initial: np.ndarray | None = None,
    deadline: Deadline | None = None,
    settle: Settle | None = None,
    reserve: int = 0,
) -> BrkgaResult:
    """Minimise ``fitness`` (population x genes -> population) over random keys.

    ``initial``: known good chromosomes placed in the first population (paper 003:
    "known good solutions may also be used to initialize a population"); ``settle``: stop early
    once the best is settled (:class:`Settle`, rounds are generations); ``reserve``: what the caller does with
    the result before ``deadline``, in chromosome evaluations -- no generation starts that would leave less time.
    """
    if n_genes < 1:
        raise ValueError(f"BRKGA needs at least one gene, got {n_genes}")
    dist = distributions or GeneDistributions.uniform(n_genes, params.elite_bias)
    if len(dist.alpha) != n_genes:
        raise ValueError(f"distributions have {len(dist.alpha)} genes, the chromosome {n_genes}")
    rng = np.random.default_rng(seed)
    seeds = np.zeros((0, n_genes))
    if initial is not None:
        seeds = np.atleast_2d(np.asarray(initial, dtype=np.float64))[: params.population]
        if seeds.shape[1] != n_genes:
            raise ValueError(f"initial chromosomes have {seeds.shape[1]} genes, expected {n_genes}")
    started = work_clock()
    pop, fit = _first_population(fitness, dist, rng, params.population, seeds, deadline)
    evaluations = len(fit)
    order = np.argsort(fit, kind="stable")
    pop, fit = pop[order], fit[order]
    history = [(evaluations, float(fit[0]))]
    generations = flat = 0
    per_generation = params.population - params.elites
    # seconds the last generation took (before the first: the first population's time per chromosome): one that
    # would end past the deadline does not start
    last = (work_clock() - started) * per_generation / evaluations
    while evaluations + per_generation <= params.evaluations \
            and not (deadline is not None and deadline.left() <= last * (1 + reserve / per_generation)):
        if settle is not None and settle.done(float(fit[0]), flat):
            break
        started = work_clock()
        elite_parents = rng.integers(0, params.elites, size=params.children)
        other_parents = rng.integers(params.elites, params.population, size=params.children)
        from_elite = rng.random((params.children, n_genes)) < dist.rho
        children = np.where(from_elite, pop[elite_parents], pop[other_parents])
        new = np.vstack([children, dist.sample(rng, params.mutants)])
        new_fit = np.asarray(fitness(new), dtype=np.float64)
        evaluations += per_generation
        pop = np.vstack([pop[: params.elites], new])
        fit = np.concatenate([fit[: params.elites], new_fit])
        order = np.argsort(fit, kind="stable")
        flat = 0 if fit[order[0]] < fit[0] else flat + 1
        pop, fit = pop[order], fit[order]
        generations += 1
        history.append((evaluations, float(fit[0])))
        last = work_clock() - started
    return BrkgaResult(best_keys=pop[0].copy(), best_fitness=float(fit[0]), evaluations=evaluations,
                       generations=generations, population=pop, fitness=fit, history=tuple(history))


#: Chromosomes of the first population scored before the first deadline check (the known good ones always).
FIRST_CHUNK = 10


def _first_population(fitness: Callable[[np.ndarray], np.ndarray], dist: GeneDistributions,
                      rng: np.random.Generator, size: int, seeds: np.ndarray,
                      deadline: Deadline | None) -> tuple[np.ndarray, np.ndarray]:
    """The first population and its fitness: ``size`` chromosomes drawn from ``dist``, the known good ``seeds`` in
    front.  With ``deadline`` they are drawn and scored in chunks, and when it passes (a population of a huge graph
    takes seconds to draw and to score) the rest is neither: the seeds and as many more as the time allowed.  Chunks
    are sized by the last chunk's speed, at most doubling, so a run with time to spare does the rest in a few; the
    draws are the same as one draw of the whole population."""
    rows: list[np.ndarray] = []
    fits: list[np.ndarray] = []
    done, chunk = 0, size if deadline is None else min(size, max(FIRST_CHUNK, len(seeds)))
    while done < size:
        started = work_clock()
        part = dist.sample(rng, chunk)
        known = seeds[done: done + chunk]
        part[: len(known)] = known
        rows.append(part)
        fits.append(np.asarray(fitness(part), dtype=np.float64))
        per_chromosome = (work_clock() - started) / chunk
        done += chunk
        left = 0.0 if deadline is None else deadline.left()  # without one, the first chunk was all of them
        if done == size or left <= 0:
            break
        # at most twice the last chunk: the known good chromosomes in front of the first one may score much
        # faster than random ones (all ops on one device: no transfers to schedule)
        chunk = min(size - done, 2 * chunk, max(1, int(left / max(per_chromosome, 1e-9))))
    return np.vstack(rows), np.concatenate(fits)
