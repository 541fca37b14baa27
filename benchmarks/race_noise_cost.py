"""What the race coupling costs a pass: drawing a position's vector of Exp(1) variables and racing a row.

    PYTHONPATH=. .venv/bin/python benchmarks/race_noise_cost.py [--rounds 200] [--threads 0]

Sampled decoding races every row the walk reaches against its position's vector
(bita/decode/sampling.py): a pass draws one vector of V exponentials a position it reaches
(RaceNoise.vector: its accepted drafts plus the bonus, at most depth + 1) and computes
argmax(p / E) once per reached row. AR draws the same vectors, one a token (``torch.multinomial``
does exactly that draw), so per emitted token the coupling costs what AR sampling costs. Timed
here, on the CPU generator, for SmolLM2's vocabulary (49,152) and Gemma 3's (262,144): the
draw, the race, ``torch.multinomial`` (the same work, for comparison) and the warp that every
sampled row needs anyway (``target_probs`` at top-p 0.95): median (and minimum) microseconds over
``--rounds``, one thread by default (the load of other processes shows in the median).
"""

import argparse
import platform
import statistics
import subprocess
import time

import torch

from bita.decode.sampling import RaceNoise, Sampling, race_winner, target_probs

VOCABS = {"SmolLM2": 49_152, "Gemma 3": 262_144}


class Timing:
    """Median and minimum microseconds of ``rounds`` calls of ``work`` (on a loaded machine the
    minimum is the one closest to the work's own cost: a longer call is preempted more often)."""

    def __init__(self, work, rounds: int):
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            work()
            times.append(time.perf_counter() - start)
        self.median, self.min = statistics.median(times) * 1e6, min(times) * 1e6

    def __str__(self) -> str:
        return f"{self.median:.0f} us (min {self.min:.0f})"


def cpu_name() -> str:
    try:
        fields = dict(line.split(":", 1) for line in subprocess.run(["lscpu"], capture_output=True, text=True)
                      .stdout.splitlines() if ":" in line)
        return (f"{fields['Model name'].strip()} (family {fields['CPU family'].strip()}, model "
                f"{fields['Model'].strip()}), {fields['CPU(s)'].strip()} CPUs")
    except (OSError, KeyError):
        return platform.processor() or "unknown CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"{cpu_name()}; torch {torch.__version__}, {torch.get_num_threads()} threads; {args.rounds} rounds")
    sampling = Sampling(0.7, top_p=0.95, seed=0)
    for name, vocab in VOCABS.items():
        logits = torch.randn(1, vocab, generator=torch.Generator().manual_seed(0)) * 3
        probs = target_probs(logits, sampling)[0]
        noise = RaceNoise(torch.Generator().manual_seed(0), first=0)

        def draw_next():  # the next position's vector, drawn, then forgotten once emitted
            position = noise.drawn
            noise.vector(position, vocab)
            noise.forget(position + 1)

        draw = Timing(draw_next, args.rounds)
        vector = noise.vector(noise.drawn, vocab)
        race = Timing(lambda: race_winner(probs, vector), args.rounds)
        generator = torch.Generator().manual_seed(0)
        multinomial = Timing(lambda: torch.multinomial(probs, 1, generator=generator), args.rounds)
        warp = Timing(lambda: target_probs(logits, sampling), max(20, args.rounds // 4))
        print(f"{name} (V = {vocab:,}): draw a vector {draw}, race a row {race}, torch.multinomial "
              f"{multinomial}; warp a row (top-p 0.95) {warp}; a pass emitting 4 tokens draws 4 vectors: "
              f"{4 * draw.median / 1000:.2f} ms (min {4 * draw.min / 1000:.2f})")


if __name__ == "__main__":
    main()
