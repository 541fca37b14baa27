"""Issue 47's crash on the real model: our CUDA graphs recorded at load, then a model compiled with
torch.compile's CUDA graphs (mode "reduce-overhead", as HF generate compiles with a static cache), then our
replays, compared with the same passes run eagerly. Prints the largest difference; a crash is the old bug.

    python3 benchmarks/gpu/graphs_beside_compile.py --model /tmp/s/model.gguf [--dtype bfloat16]
(tests/runtime/test_padded.py has the same check on a tiny model, for a CUDA machine with pytest.)"""
import torch
from loaded_on_gpu import loaded_from_arguments

from bita.runtime.padded import PaddedLean


def main() -> None:
    loaded = loaded_from_arguments(__doc__.splitlines()[0])
    graphed = loaded.runtime.forward
    assert isinstance(graphed, PaddedLean) and graphed.graphs, f"no CUDA graphs here: {loaded.runtime.describe()}"
    eager = PaddedLean(graphed.lean, graphed.way, graphs=False)
    caches = graphed.new_cache(), eager.new_cache()
    weight = torch.randn(1024, 1024, device="cuda")
    compiled = torch.compile(lambda x: torch.relu(x @ weight) @ weight, mode="reduce-overhead")
    for _ in range(3):
        compiled(torch.randn(8, 1024, device="cuda"))
    torch.cuda.empty_cache()
    embed = loaded.model.get_input_embeddings()
    generator, worst = torch.Generator().manual_seed(1), 0.0
    for start, rows in ((0, 40), (40, 1), (41, 7), (48, 64)):
        embeds = embed(torch.randint(3, embed.num_embeddings, (rows,), generator=generator).cuda())
        allowed = torch.ones(rows, start + rows, dtype=torch.bool, device="cuda").tril(start)
        positions = torch.arange(start, start + rows, device="cuda")
        ours, expected = (side.forward(cache, embeds, positions, allowed)
                          for side, cache in zip((graphed, eager), caches))
        torch.cuda.synchronize()
        worst = max(worst, float((ours.float() - expected.float()).abs().max()))
    print(f"{loaded.runtime.describe()}\nreplays after a compiled model's CUDA graphs: no crash, "
          f"largest difference from eager passes {worst:.3g}")


if __name__ == "__main__":
    main()
