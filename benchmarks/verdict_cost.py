"""What recording the verifier's verdicts costs a BiTA step (bita/decode/explain.py).

    PYTHONPATH=. .venv/bin/python benchmarks/verdict_cost.py [--rounds 3] [--tokens 64] [--dtype auto]
                                                              [--tree efficient:3/chain-groups] [--threads 0]
                                                              [--temperature 0.7 --top-p 0.95]

Three measures: (1) each prompt decoded with and without ``record_verdicts``, the two interleaved (the
order swapped every round, so both see the same load): the median seconds a step of each; (2) inside the
runs that record, the verdicts' own time in each step against that step's, by the wall clock and by the
process's CPU time (a ratio per step, so load that comes and goes cancels; CPU time also leaves out the
time other processes took the cores); (3) ``row_verdicts`` alone for 1 and 4 rows of the model's vocabulary
(a pass emits 1 to depth + 1 tokens, greedy). The outputs with and without recording are checked equal;
with ``--temperature`` the runs are sampled (seed 0), their verdicts carrying the warp as well.
"""

import argparse
import statistics
import time

import torch
from race_noise_cost import Timing, cpu_name

from bita.decode import step
from bita.decode.explain import row_verdicts
from bita.decode.sampling import GREEDY, Sampling
from bita.generate import Request, stream_bita
from bita.model.loading import encode_chat, load_model
from bita.model.shipped import resolve_adapter
from bita.plan.tree_plan import plan_tree

PROMPTS = ["Name three fruits and say which you like best.", "Write a Python function that reverses a string.",
           "Explain in two sentences why the sky is blue."]
CLOCKS = (time.perf_counter, time.process_time)  # wall, CPU


def spent_on(work, spent: list) -> object:
    """``work()``, appending its (wall, CPU) seconds to ``spent``."""
    start = [clock() for clock in CLOCKS]
    done = work()
    spent.append([clock() - begun for clock, begun in zip(CLOCKS, start)])
    return done


def timed_verdicts(spent: list) -> None:
    """Make the decode step time its verdicts into ``spent``, one (wall, CPU) entry a pass."""
    def timing(function):
        return lambda *args: spent_on(lambda: function(*args), spent)
    step.row_verdicts, step.pass_verdicts = timing(step.row_verdicts), timing(step.pass_verdicts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--tree", default="efficient:3/chain-groups", help="a fixed shape: auto would measure")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--temperature", type=float, default=0.0, help="0: greedy; else sampled with seed 0")
    parser.add_argument("--top-p", type=float, default=1.0)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    loaded = load_model("default", dtype=args.dtype)
    adapter, _ = resolve_adapter(loaded, None)
    sampling = Sampling(args.temperature, args.top_p, seed=0) if args.temperature else GREEDY
    plan = plan_tree(loaded, adapter, args.tree, "both", sampling=sampling)
    print(f"{cpu_name()}; torch {torch.__version__}, {torch.get_num_threads()} threads; {loaded.runtime.dtype}; "
          f"tree {plan.spec}; {sampling.describe()}; {len(PROMPTS)} prompts x {args.tokens} tokens x {args.rounds} rounds", flush=True)
    verdicts: list = []
    timed_verdicts(verdicts)
    step_seconds: dict[bool, list[float]] = {False: [], True: []}
    shares = []  # per recording step: (wall, CPU) share of the verdicts
    for round_ in range(args.rounds):
        for prompt in PROMPTS:
            ids = encode_chat(loaded.tokenizer, [{"role": "user", "content": prompt}])
            texts = {}
            for record in ((False, True) if round_ % 2 == 0 else (True, False)):
                verdicts.clear()
                request = Request(ids, args.tokens, plan, sampling=sampling, record_verdicts=record)
                steps, spent, records = stream_bita(loaded, adapter, request), [], []
                while (found := spent_on(lambda: next(steps, None), spent)) is not None:
                    records.append(found)
                step_seconds[record].append(statistics.median(r.seconds for r in records))
                shares += [[part / whole for part, whole in zip(own, total)] for own, total in zip(verdicts, spent)]
                texts[record] = [t for r in records for t in r.emitted]
                print(f"  round {round_ + 1}, {'with' if record else 'without'} verdicts: {len(records)} passes, "
                      f"median {step_seconds[record][-1] * 1e3:.1f} ms a step", flush=True)
            assert texts[False] == texts[True], "recording changed the output"
    off, on = (statistics.median(step_seconds[flag]) for flag in (False, True))
    print(f"(1) median step: {off * 1e3:.2f} ms without verdicts, {on * 1e3:.2f} ms with: "
          f"{100 * (on / off - 1):+.1f} % ({len(step_seconds[False])} runs each)")
    for clock, name in enumerate(("wall clock", "CPU time")):
        ratios = [share[clock] for share in shares]
        low, _, high = statistics.quantiles(ratios, n=4)
        print(f"(2) the verdicts' share of their step, {name}: median {100 * statistics.median(ratios):.2f} %, "
              f"quartiles {100 * low:.2f} / {100 * high:.2f} % ({len(ratios)} steps)")
    vocab = loaded.model.get_output_embeddings().weight.shape[0]
    for rows in (1, 4):
        logits = torch.randn(rows, vocab, generator=torch.Generator().manual_seed(0)) * 4
        chosen, rejected = logits.argmax(-1).tolist(), [[5, 6, 7]] * rows
        alone = Timing(lambda: row_verdicts(logits, chosen, rejected, GREEDY, loaded.runtime.dtype), 200)
        print(f"(3) row_verdicts alone, {rows} row(s) of {vocab:,}: {alone}: {100 * alone.median / 1e6 / off:.2f} % "
              "of the median step without verdicts")


if __name__ == "__main__":
    main()
