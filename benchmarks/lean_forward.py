"""How much of a pass is transformers' modeling code: a lean Llama-family forward over the same
weights, timed against transformers' own, interleaved in one process.

    PYTHONPATH=. .venv/bin/python benchmarks/lean_forward.py [--rounds 15] [--context 300]

The lean forward is gpt-fast style, about 40 lines: QKV and gate/up fused once, RMSNorm and
rotary written out, a preallocated KV buffer written in place at the pass's slots (no cache
concatenation, no crop), SDPA with ``enable_gqa`` and a boolean mask, each linear on the path the
machine's kernel plan chose for the pass's rows. transformers' side is what the engine runs today:
the model loaded with ``--kernels auto`` (the same plan) and a ``DynamicCache`` cropped back after
each pass. Both feed R rows after a cached ``--context``-token prompt under a tree-like mask
(causal, a third of the earlier new rows hidden), and both compute the LM head on every row.
First the logits of the two are compared; then the median ms per pass of each, with the spread.
A measurement, not an engine: nothing in ``bita`` uses it.
"""

import argparse
import statistics
import time

import torch
import torch.nn.functional as F
from transformers import DynamicCache

from bita.decode.masks import additive_mask
from bita.model.device import describe_device
from bita.model.kernel_plan import bucket_of, pack, run_path
from bita.model.loading import load_model

ROWS = (1, 2, 4, 8, 16)


class LeanLlama:
    """A Llama-family decoder (Llama, SmolLM2, Qwen2 without biases, Mistral) over ``model``'s weights."""

    def __init__(self, model, max_length: int):
        config = model.config
        self.heads, self.kv_heads = config.num_attention_heads, config.num_key_value_heads
        self.head_dim = getattr(config, "head_dim", None) or config.hidden_size // self.heads
        self.eps = config.rms_norm_eps
        self.embed = model.model.embed_tokens.weight
        self.inv_freq = model.model.rotary_emb.inv_freq.float()
        self.paths = model.lm_head.bita_paths if "bita_paths" in vars(model.lm_head) else None
        self.layers = []
        for layer in model.model.layers:
            attention, mlp = layer.self_attn, layer.mlp
            self.layers.append((layer.input_layernorm.weight, self.copies(torch.cat(
                [attention.q_proj.weight, attention.k_proj.weight, attention.v_proj.weight])),
                self.copies(attention.o_proj.weight), layer.post_attention_layernorm.weight,
                self.copies(torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight])),
                self.copies(mlp.down_proj.weight)))
        self.layer_paths = model.model.layers[0].mlp.up_proj.bita_paths
        self.norm, self.head = model.model.norm.weight, self.copies(model.lm_head.weight)
        shape = (len(self.layers), self.kv_heads, max_length, self.head_dim)
        self.keys, self.values = torch.zeros(shape), torch.zeros(shape)

    @staticmethod
    def copies(weight):
        return weight, weight.t().contiguous(), pack(weight)

    @staticmethod
    def linear(x, path, weight):
        return run_path(path, x, weight[0], None, weight[1], weight[2])

    def rms(self, x, weight):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * weight

    def rotate(self, x, cos, sin):
        """x [R, heads, D] rotated by position (transformers' rotate_half convention)."""
        half = x.shape[-1] // 2
        return x * cos + torch.cat([-x[..., half:], x[..., :half]], -1) * sin

    @torch.inference_mode()
    def forward(self, ids: torch.Tensor, start: int, allowed: torch.Tensor) -> torch.Tensor:
        """ids [R] at positions start.. (KV slots start..start+R); allowed [R, start+R] bool -> logits [R, V]."""
        rows, end = ids.shape[0], start + ids.shape[0]
        path = self.layer_paths[bucket_of(rows)]
        freqs = torch.arange(start, end, dtype=torch.float32)[:, None] * self.inv_freq[None]
        cos, sin = torch.cat([freqs, freqs], -1).cos()[:, None], torch.cat([freqs, freqs], -1).sin()[:, None]
        x = F.embedding(ids, self.embed)
        q_size, kv_size = self.heads * self.head_dim, self.kv_heads * self.head_dim
        for index, (norm_in, qkv, out, norm_post, gate_up, down) in enumerate(self.layers):
            q, k, v = self.linear(self.rms(x, norm_in), path, qkv).split([q_size, kv_size, kv_size], -1)
            q = self.rotate(q.view(rows, self.heads, self.head_dim), cos, sin)
            self.keys[index, :, start:end] = self.rotate(k.view(rows, self.kv_heads, self.head_dim), cos, sin)\
                .transpose(0, 1)
            self.values[index, :, start:end] = v.view(rows, self.kv_heads, self.head_dim).transpose(0, 1)
            attended = F.scaled_dot_product_attention(q.transpose(0, 1)[None], self.keys[index, :, :end][None],
                                                      self.values[index, :, :end][None], attn_mask=allowed[None, None],
                                                      enable_gqa=True)
            x = x + self.linear(attended[0].transpose(0, 1).reshape(rows, q_size), path, out)
            gate, up = self.linear(self.rms(x, norm_post), path, gate_up).chunk(2, -1)
            x = x + self.linear(F.silu(gate) * up, path, down)
        head_path = self.paths[bucket_of(rows)] if self.paths else path
        return self.linear(self.rms(x, self.norm), head_path, self.head)


def tree_mask(rows: int, context: int, generator: torch.Generator) -> torch.Tensor:
    """[rows, context + rows] bool: the context, then causal new rows with a third of the earlier ones hidden."""
    new = (torch.rand(rows, rows, generator=generator) > 1 / 3).tril() | torch.eye(rows, dtype=torch.bool)
    return torch.cat([torch.ones(rows, context, dtype=torch.bool), new], 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--context", type=int, default=300)
    args = parser.parse_args()
    loaded = load_model(device="cpu")
    model, generator = loaded.model, torch.Generator().manual_seed(0)
    lean = LeanLlama(model, args.context + max(ROWS))
    prompt = torch.randint(100, 49000, (args.context,), generator=generator)
    cache = DynamicCache(config=model.config)
    with torch.inference_mode():
        model(input_ids=prompt[None], past_key_values=cache, use_cache=True)
    lean.forward(prompt, 0, torch.ones(args.context, args.context, dtype=torch.bool).tril())

    def hf_pass(ids, allowed):
        with torch.inference_mode():
            logits = model(input_ids=ids[None], past_key_values=cache, use_cache=True,
                           position_ids=torch.arange(args.context, args.context + len(ids))[None],
                           attention_mask=additive_mask(allowed, torch.float32, "cpu")).logits[0]
        cache.crop(-len(ids))
        return logits

    print(f"{loaded.name}, {describe_device(loaded.device)}, kernels {loaded.kernels}; {args.context}-token context, "
          f"{args.rounds} interleaved rounds after one warm-up, median ms (25th-75th percentile)\n")
    print("| rows | transformers + DynamicCache | lean + static KV | lean / transformers | max logit difference |")
    print("|---:|---:|---:|---:|---:|")
    for rows in ROWS:
        ids = torch.randint(100, 49000, (rows,), generator=generator)
        allowed = tree_mask(rows, args.context, generator)
        difference = (hf_pass(ids, allowed) - lean.forward(ids, args.context, allowed)).abs().max().item()
        times = {"hf": [], "lean": []}
        for round_index in range(args.rounds + 1):
            for name, run in (("hf", lambda: hf_pass(ids, allowed)), ("lean", lambda: lean.forward(ids, args.context,
                                                                                                     allowed))):
                started = time.perf_counter()
                run()
                if round_index:
                    times[name].append(1000 * (time.perf_counter() - started))
        cells = []
        for name in ("hf", "lean"):
            quartiles = statistics.quantiles(times[name], n=4)
            cells.append(f"{statistics.median(times[name]):.1f} ({quartiles[0]:.1f}-{quartiles[2]:.1f})")
        ratio = statistics.median(times["lean"]) / statistics.median(times["hf"])
        print(f"| {rows} | {cells[0]} | {cells[1]} | {ratio:.2f} | {difference:.1e} |")


if __name__ == "__main__":
    main()
