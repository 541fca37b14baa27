"""An adapter's model card (README.md): the Hub's metadata (``base_model:``, licence, library, tags)
and what a reader wants to know: what the adapter is, how to use it, how it was trained and how well
its masks draft (the training figures its config records)."""

from __future__ import annotations

from huggingface_hub import ModelCard, ModelCardData

from .adapter_files import looks_like_repo_id

LIBRARY = "bita-decoding"
GENERATED_TAG = "bita"  # a card carrying this tag and library was generated here, and is regenerated on save
# The base models of the shipped adapters, by the name they were loaded with: (Hub id, licence id)
KNOWN_BASES = {"SmolLM2-135M-Instruct": ("HuggingFaceTB/SmolLM2-135M-Instruct", "apache-2.0"),
               "gemma-3-270m-q4_k_m.gguf": ("google/gemma-3-270m", "gemma")}
TRAINING_FIGURES = (("steps_done", "steps"), ("batch_size", "batch size"), ("lr", "learning rate"),
                    ("train_samples", "training samples"), ("train_answer_tokens", "training answer tokens"),
                    ("final_loss", "final loss"), ("seconds", "seconds"), ("hardware", "hardware"))
BODY = """
# BiTA adapter for {base}

A [BiTA](https://arxiv.org/abs/2401.12522) adapter (Lin et al., IJCAI 2024) for the frozen model
`{base}`: {prompt_tokens} {prompt_style} prompt tokens and {mask_tokens} mask tokens, {parameters:,}
parameters. With it one forward pass verifies the previous pass's drafts and drafts the next tokens
over a token tree; greedy output is token for token the base model's own, and sampled output has
exactly its distribution.

## Use

```bash
pip install bita-decoding
bita generate --model {load_name} --adapter {repo_id} --mode both --prompt "Name three colours."
```

```python
import bita

loaded = bita.load_model("{load_name}")
adapter = bita.BitaAdapter.from_pretrained("{repo_id}", model=loaded.model)
ids = bita.encode_chat(loaded.tokenizer, [{{"role": "user", "content": "Name three colours."}}])
print(bita.collect("bita", loaded, bita.stream_bita(loaded, adapter, bita.Request(ids, 64))).text)
```

The adapter loads only on the weights it was made for: their fingerprint is `{fingerprint}`
(`bita_config.json`, `base`).

## Training

{training}

## Files

- `bita_adapter.safetensors`: the prompt key/values and mask embeddings (float32)
- `bita_config.json`: the base model, its identity and the adapter's settings, how it was trained
- `bita_acceptance.json`: draft-rank statistics on held-out data, which `--tree auto` plans from
"""


def model_card(config: dict, parameters: int, repo_id: str | None = None) -> ModelCard:
    """The card of an adapter whose config (``dataclasses.asdict`` of an AdapterConfig) is ``config``
    and which holds ``parameters`` numbers; ``repo_id``: the repository its examples name."""
    base = config["base"]
    hub_id, licence = KNOWN_BASES.get(base["name"], (base["name"] if looks_like_repo_id(base["name"]) else None, None))
    data = ModelCardData(library_name=LIBRARY, tags=[GENERATED_TAG, "speculative-decoding"],
                         base_model=hub_id, license=licence)
    load_name = "default" if base["name"] == "SmolLM2-135M-Instruct" else base["name"]
    body = BODY.format(base=hub_id or base["name"], prompt_tokens=config["prompt_tokens"],
                       prompt_style=config["prompt_style"], mask_tokens=config["mask_tokens"],
                       parameters=parameters, load_name=load_name, repo_id=repo_id or "USER/NAME",
                       fingerprint=base["fingerprint"], training=training_table(config["training"]))
    return ModelCard(f"---\n{data.to_yaml()}\n---\n{body}")


def training_table(training: dict) -> str:
    """The training figures ``training`` records, as a Markdown table (held-out top-1 per mask depth
    first); a sentence where it records none."""
    rows = [(label, _figure(training[key])) for key, label in TRAINING_FIGURES if key in training]
    top1 = training.get("heldout_top1_per_depth")
    if top1:
        rows.insert(0, ("held-out top-1 per mask depth", " / ".join(f"{value:.3f}" for value in top1)))
    if not rows:
        return "Untrained: it keeps output identical but drafts poorly."
    return "\n".join(["| figure | value |", "| --- | --- |", *(f"| {label} | {value} |" for label, value in rows)])


def is_generated_card(text: str) -> bool:
    """Whether the card ``text`` is one ``model_card`` wrote."""
    try:
        data = ModelCard(text).data
    except ValueError:
        return False
    return data.library_name == LIBRARY and GENERATED_TAG in (data.tags or [])


def _figure(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
