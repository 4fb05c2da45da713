"""The searches over an `OptionSpace`: genetic (as in Tensor Comprehensions), random, and TPE.

Each search proposes genomes (`ask`) and learns their measured times (`tell`, None for a
candidate that failed, was wrong or ran out of time); the tuner (`tuner.py`) runs several
candidates at once, so a search may be asked again before it is told. `ask` returns None when
it has nothing to propose until more results come in (a generation still being measured).
The first genome every search proposes is the default build's (genome 0), the baseline.

The model-based search is Optuna's TPE (Tree-structured Parzen Estimator): the space is all
categorical (tile sizes, presets, switches), which TPE models directly, per parameter or
jointly (`multivariate`); Optuna's ask-and-tell interface fits a tuner that runs candidates in
parallel worker processes, it records failed trials without guessing a value for them, and it is
a small pure-Python dependency. Nevergrad's strengths are continuous and noisy spaces; its
discrete optimizers would need the categorical choices recast as integers.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from polyflow.tune.space import Genome, OptionSpace

SEARCHES = ("genetic", "random", "tpe")


class Search(Protocol):
    name: str

    def ask(self) -> Genome | None: ...

    def tell(self, genome: Genome, seconds: float | None) -> None: ...


@dataclass
class RandomSearch:
    """Valid genomes drawn uniformly, the default first."""

    space: OptionSpace
    seed: int = 0
    name: str = "random"
    _rng: random.Random = field(init=False)
    _started: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def ask(self) -> Genome | None:
        if not self._started:
            self._started = True
            return self.space.default_genome()
        return self.space.random_genome(self._rng)

    def tell(self, genome: Genome, seconds: float | None) -> None:
        pass


@dataclass
class GeneticSearch:
    """A generational genetic search, as Tensor Comprehensions' autotuner: a population of
    `population` genomes (at first the default, half as many of its neighbours, one choice
    changed each, and random ones); each next generation keeps
    the `elites` fastest as they are and breeds the rest from parents picked by fitness
    (1/time; tournaments of `tournament`), by uniform crossover and then mutation of each
    gene with probability `mutation`. A generation is asked for in full before the next is
    bred from its times."""

    space: OptionSpace
    population: int = 12
    elites: int = 2
    mutation: float = 0.15
    crossover: float = 0.8
    tournament: int = 3
    seed: int = 0
    name: str = "genetic"
    generation: int = field(default=0, init=False)
    _rng: random.Random = field(init=False)
    _pending: list[Genome] = field(default_factory=list, init=False)
    _asked: list[Genome] = field(default_factory=list, init=False)
    _times: dict[str, float | None] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        first = [self.space.default_genome()]
        # half the first generation varies one choice of the default at a time (what each
        # choice is worth alone: few candidates already tell much on a slow kernel), the rest
        # is random (combinations)
        neighbours = self.space.neighbours(self.space.default_genome())
        self._rng.shuffle(neighbours)
        first += neighbours[: max(0, self.population // 2 - 1)]
        while len(first) < self.population:
            first.append(self.space.random_genome(self._rng))
        self._pending = first

    def ask(self) -> Genome | None:
        if not self._pending:
            if any(self.space.key_of(g) not in self._times for g in self._asked):
                return None  # the generation is still being measured
            self._breed()
        genome = self._pending.pop(0)
        self._asked.append(genome)
        return genome

    def tell(self, genome: Genome, seconds: float | None) -> None:
        self._times[self.space.key_of(genome)] = seconds

    def _fitness(self, genome: Genome) -> float:
        seconds = self._times.get(self.space.key_of(genome))
        return 0.0 if not seconds else 1.0 / seconds

    def _breed(self) -> None:
        ranked = sorted(self._asked, key=self._fitness, reverse=True)
        alive = [g for g in ranked if self._fitness(g) > 0] or ranked
        children = [dict(g) for g in alive[: self.elites]]
        while len(children) < self.population:
            mother, father = self._pick(alive), self._pick(alive)
            child = dict(mother)
            if self._rng.random() < self.crossover:
                child = {k: (mother if self._rng.random() < 0.5 else father)[k] for k in mother}
            child = self._mutate(child)
            if self.space.valid(child):
                children.append(child)
        self.generation += 1
        self._asked = []
        self._pending = children

    def _pick(self, alive: list[Genome]) -> Genome:
        entrants = [self._rng.choice(alive) for _ in range(min(self.tournament, len(alive)))]
        return max(entrants, key=self._fitness)

    def _mutate(self, genome: Genome) -> Genome:
        mutated = dict(genome)
        for parameter in self.space.parameters:
            if len(parameter.values) > 1 and self._rng.random() < self.mutation:
                mutated[parameter.name] = self._rng.randrange(len(parameter.values))
        return mutated


@dataclass
class TpeSearch:
    """Optuna's TPE over the space's parameters as categorical choices (indices), the
    default enqueued first; `startup` random trials before the model guides; failed
    candidates are told as failed trials."""

    space: OptionSpace
    seed: int = 0
    startup: int = 8
    name: str = "tpe"
    _study: Any = field(init=False)
    _trials: dict[str, list[Any]] = field(default_factory=dict, init=False)
    _distributions: dict[str, Any] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        sampler = optuna.samplers.TPESampler(
            seed=self.seed,
            n_startup_trials=self.startup,
            multivariate=True,
            constant_liar=True,  # candidates in flight count as bad guesses, not as unknowns
        )
        self._study = optuna.create_study(direction="minimize", sampler=sampler)
        self._distributions = {
            p.name: optuna.distributions.CategoricalDistribution(list(range(len(p.values))))
            for p in self.space.parameters
        }
        self._study.enqueue_trial(self.space.default_genome())

    def ask(self) -> Genome | None:
        for _ in range(20):
            trial = self._study.ask(self._distributions)
            genome = {name: int(trial.params[name]) for name in self._distributions}
            if self.space.valid(genome):
                self._trials.setdefault(self.space.key_of(genome), []).append(trial)
                return genome
            self._fail(trial)
        return self.space.default_genome()

    def tell(self, genome: Genome, seconds: float | None) -> None:
        waiting = self._trials.get(self.space.key_of(genome))
        if not waiting:
            return
        trial = waiting.pop(0)
        if seconds is None:
            self._fail(trial)
        else:
            self._study.tell(trial, seconds)

    def _fail(self, trial: Any) -> None:
        import optuna

        self._study.tell(trial, state=optuna.trial.TrialState.FAIL)


def make_search(name: str, space: OptionSpace, *, seed: int = 0, population: int | None = None) -> Search:
    """The search called `name` (one of SEARCHES) over `space`."""
    makers: dict[str, Callable[[], Search]] = {
        "genetic": lambda: GeneticSearch(space, seed=seed, population=population or 12),
        "random": lambda: RandomSearch(space, seed=seed),
        "tpe": lambda: TpeSearch(space, seed=seed),
    }
    if name not in makers:
        raise ValueError(f"unknown search '{name}' (known: {', '.join(SEARCHES)})")
    return makers[name]()
