"""BiTA decoding with a KV cache: prefill, then one verify-and-draft forward pass per step.

The cache holds ``[P prompt slots | accepted context]``. Each pass appends its new rows,
then keeps exactly the root and the accepted candidates (gathered in place, then cropped).

Two things keep a pass cheap. A mask group has only ``tree.depth`` masks, not the adapter's
n: mask i sees only masks before it, so later masks would draft depths the tree never uses.
And one LM-head call covers the verified rows and the mask groups, so the head's weights
(a fifth of a small model's) are read once per pass, unless the groups add many rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch
from torch import nn
from transformers import DynamicCache

from ..drafts.corpus import CorpusIndex
from ..drafts.dynamic import DynamicShape, dynamic_tree
from ..drafts.ngram import MAX_MATCH, NgramIndex
from ..drafts.tree import EMPTY_TREE, ROOT, DraftTree
from ..drafts.trie import GROUPS_NONE, NGRAM_RANK, build_trie
from ..model.adapter import BitaAdapter
from ..model.device import device_of, output_logits, timed
from ..model.static_kv import StaticKV
from .masks import PassLayout, allowed_keys, decode_layout
from .records import ACCEPTED, REJECTED, DraftNode, StepRecord
from ..model.rows import cache_with, forward_rows, keep_cache_rows, release_cache
from .sampling import GREEDY, RaceNoise, Sampling, next_token
from .stopping import StopCondition
from .verify import Coupling, per_position, verify_greedy, verify_sampling


@dataclass
class Drafts:
    """Top-k drafts for the next pass: tokens and probs are [depth, k]."""

    tokens: torch.Tensor
    probs: torch.Tensor

    def as_lists(self) -> list[list[tuple[int, float]]]:
        return [list(zip(t.tolist(), p.tolist())) for t, p in zip(self.tokens, self.probs)]


@dataclass
class DecodeState:
    cache: DynamicCache | StaticKV
    context_length: int  # ordinary tokens in the cache (prompt slots excluded)
    root: int  # last emitted token: fed, and cached, by the next pass
    drafts: Drafts | None  # None when the last accepted node carried no mask group, or masks are off

    def rewind(self, n_prompt: int, drafts: Drafts | None) -> None:
        """Drop what later passes appended to this state's cache (a pass grows the cache in place) and
        draft with ``drafts`` next: to time one pass shape again and again from the same state."""
        self.cache.crop(-(self.cache.get_seq_length() - n_prompt - self.context_length))
        self.drafts = drafts


@torch.inference_mode()
def new_cache(model: nn.Module, adapter: BitaAdapter | None = None, rows: int = 0) -> DynamicCache | StaticKV:
    """An empty cache for ``model``'s forward with ``adapter``'s prompt key/values in its first P slots
    and room for ``rows`` slots past them (model/rows.py). Give it back with ``release_cache``."""
    dtype = model.get_input_embeddings().weight.dtype
    return cache_with(model, adapter.prompt_key_values(model, dtype) if adapter else [], rows)


def forward_layout(model: nn.Module, adapter: BitaAdapter, cache: DynamicCache | StaticKV, layout: PassLayout,
                   ordinary_tokens: torch.Tensor, position: int, context_length: int) -> torch.Tensor:
    """Run the new rows of ``layout`` through the frozen model, appending them to ``cache``.

    ordinary_tokens: [chain + tree.size] token ids; mask rows use the adapter's embeddings.
    position: position of the root row. Returns last hidden states [R, H].
    """
    device = device_of(model)
    dtype = model.get_input_embeddings().weight.dtype
    ordinary = model.get_input_embeddings()(ordinary_tokens.to(device))
    masks = adapter.mask_embeddings[: layout.n_masks].to(dtype).repeat(len(layout.tree.group_anchors), 1)
    return forward_rows(model, cache, torch.cat([ordinary, masks.to(device)]), position + layout.position_offsets,
                        allowed_keys(layout, adapter.n_prompt, context_length), adapter.n_prompt)


def pass_tree(tree: DraftTree | DynamicShape, drafts: Drafts | None,
              reserved_rows: int) -> tuple[DraftTree, list[float] | None]:
    """The mask tree of one pass: ``tree`` itself, or a dynamic shape's tree for this pass's drafts
    (``reserved_rows``: what an n-gram chain takes of its row budget) with each node's estimated chance."""
    if not isinstance(tree, DynamicShape):
        return tree, None
    if drafts is None:
        return EMPTY_TREE, []
    return dynamic_tree(drafts.probs.tolist(), tree, reserved_rows)


def drafts_from(logits: torch.Tensor, k: int) -> Drafts:
    """Mask-group logits [depth, V] -> top-k drafts per depth."""
    top = torch.softmax(logits, dim=-1).topk(k, dim=-1)
    return Drafts(top.indices.cpu(), top.values.cpu())


# A second LM-head call reads the head's weights again; on a 2-core CPU that costs about as
# much as 16 more rows in the first call (measured), so groups adding more rows get their own call.
# On a GPU a call is launch-bound and rows nearly free: one call always.
MAX_SHARED_HEAD_ROWS = 16


def one_head_call(device: torch.device, group_rows: int) -> bool:
    """Whether a pass's verified rows and its ``group_rows`` mask-group rows share one LM-head call."""
    return device.type == "cuda" or group_rows <= MAX_SHARED_HEAD_ROWS


def pass_logits(model: nn.Module, hidden: torch.Tensor, layout: PassLayout, verified: int):
    """Logits of the first ``verified`` rows [verified, V], a function giving a group's logits
    [depth, V] by its index in ``layout.group_rows``, and every group's [G, depth, V] where one head
    call made them (else None); one head call when cheaper."""
    groups = layout.group_rows
    if not one_head_call(hidden.device, (groups.shape[0] - 1) * groups.shape[1]):
        return (output_logits(model, hidden[:verified]),
                lambda group: output_logits(model, hidden[groups[group]]), None)
    rows = torch.cat([torch.arange(verified), groups.flatten()])
    logits = output_logits(model, hidden[rows.to(hidden.device)])
    every = logits[verified:].view(*groups.shape, logits.shape[-1])
    return logits[:verified], lambda group: every[group], every


def fused_readback(device: torch.device) -> bool:
    """Whether a greedy pass brings back its argmax and every group's drafts in one copy: on a GPU,
    where each copy back waits for the device; on a CPU the chosen group's alone is cheaper."""
    return device.type == "cuda"


def drafts_on_demand(group_logits: Callable[[int], torch.Tensor], k: int) -> Callable[[int], Drafts]:
    """A group's top-``k`` drafts by its index, computed when asked (one group's softmax)."""
    return lambda group: drafts_from(group_logits(group), k)


def read_greedy(verified_logits: torch.Tensor, group_logits: Callable[[int], torch.Tensor],
                every_group: torch.Tensor | None, k: int) -> tuple[list[int], Callable[[int], Drafts]]:
    """The argmax of each verified row [verified, V], and a function giving a group's top-``k`` drafts
    by index. With ``fused_readback`` and every group's logits [G, depth, V] at hand, both come back in
    one copy (ids as float64, exact); else the argmax now and a group's drafts when asked."""
    argmax = verified_logits.argmax(-1)
    if every_group is None or not fused_readback(verified_logits.device):
        return argmax.tolist(), drafts_on_demand(group_logits, k)
    top = torch.softmax(every_group, dim=-1).topk(k, dim=-1)  # [G, depth, k]
    packed = torch.cat([argmax.double(), top.indices.flatten().double(), top.values.flatten().double()]).cpu()
    count, shape = argmax.numel(), top.indices.shape
    tokens = packed[count:count + top.indices.numel()].long().view(shape)
    probs = packed[count + top.indices.numel():].to(top.values.dtype).view(shape)
    return packed[:count].long().tolist(), lambda group: Drafts(tokens[group], probs[group])


def _timed_record(model, record_fn):
    (state, record), record.seconds = timed(device_of(model), record_fn)
    return state, record


@torch.inference_mode()
def prefill(model: nn.Module, adapter: BitaAdapter, prompt_ids: list[int], tree: DraftTree | DynamicShape,
            record_attention: bool = False, sampling: Sampling = GREEDY, noise: RaceNoise | None = None,
            cache: DynamicCache | StaticKV | None = None) -> tuple[DecodeState, StepRecord]:
    """Encode the prompt plus one mask group on its last token: the first AR token (argmax, or the
    race winner with ``noise``'s vector when ``sampling`` samples) and the drafts ``tree`` needs
    (``tree.depth`` depths, top ``tree.max_rank`` each; none for an empty tree). ``cache``: a
    ``new_cache(model, adapter, ...)`` made before the timed pass (default: one made here)."""
    cache = cache if cache is not None else new_cache(model, adapter)

    def run():
        chain = len(prompt_ids)
        layout = decode_layout(EMPTY_TREE, tree.depth, chain)
        hidden = forward_layout(model, adapter, cache, layout, torch.tensor(prompt_ids), chain - 1, 0)
        logits = output_logits(model, hidden[chain - 1:])  # the last prompt row, then the group
        bonus = next_token(logits[0], sampling, noise, chain)
        drafts = drafts_from(logits[1:], tree.max_rank) if tree.depth else None
        keep_cache_rows(cache, adapter.n_prompt, list(range(chain)))
        record = StepRecord(index=0, kind="prefill", position=chain - 1, root=prompt_ids[-1], rows=layout.rows,
                            bonus=bonus, next_drafts=drafts.as_lists() if drafts else [], n_prompt=adapter.n_prompt,
                            sampled=not sampling.greedy)
        attach_attention(record, layout, adapter.n_prompt, 0, record_attention)
        return DecodeState(cache, chain, bonus, drafts), record
    return _timed_record(model, run)


@torch.inference_mode()
def tree_step(model: nn.Module, adapter: BitaAdapter, state: DecodeState, tree: DraftTree | DynamicShape,
              index: int, record_attention: bool = False, ngram: Sequence[int] = (), ngram_groups: str = GROUPS_NONE,
              sampling: Sampling = GREEDY, noise: RaceNoise | None = None,
              corpus: Sequence[int] = (), coupling: Coupling = per_position) -> tuple[DecodeState, StepRecord]:
    """Feed root + candidates + mask groups; verify; keep the accepted path in the cache.

    The candidates are the trie of ``tree`` (a dynamic shape: the tree its drafts' confidence picks,
    bita/drafts/dynamic.py) filled with ``state.drafts`` (when there are any) merged with the n-gram
    chain ``ngram`` and the corpus chain ``corpus`` (bita/drafts/trie.py); groups have ``tree.depth`` masks.
    Verification is the greedy walk on the argmax, or with ``sampling`` that samples, on race
    winners with ``noise``'s vectors by position (``coupling``: bita/decode/verify.py), so the
    tokens emitted are AR's with the same seed. The drafts stay top-k either way.
    """
    def run():
        drafts = state.drafts
        masks, chances = pass_tree(tree, drafts, len(ngram) + len(corpus))
        trie = build_trie(masks, drafts.tokens.tolist() if drafts is not None else None, ngram, ngram_groups, corpus)
        layout = decode_layout(trie.tree, tree.depth, 1)
        candidates = list(trie.tokens)
        start = adapter.n_prompt + state.context_length
        hidden = forward_layout(model, adapter, state.cache, layout, torch.tensor([state.root] + candidates),
                                state.context_length, state.context_length)
        verified_logits, group_logits, every_group = pass_logits(model, hidden, layout, 1 + trie.tree.size)
        if sampling.greedy:
            argmax, group_drafts = read_greedy(verified_logits, group_logits, every_group, tree.max_rank)
            verdict = verify_greedy(trie.tree, candidates, argmax)
        else:
            noise_rows = coupling(noise, trie.tree, state.context_length + 1)
            verdict = verify_sampling(trie.tree, candidates, verified_logits, sampling, noise_rows)
            group_drafts = drafts_on_demand(group_logits, tree.max_rank)
        carries_group = tree.depth > 0 and (verdict.last == ROOT or trie.tree.nodes[verdict.last].has_group)
        next_drafts = group_drafts(layout.group_of(verdict.last)) if carries_group else None
        keep_cache_rows(state.cache, start, [0] + [layout.node_row(i) for i in verdict.accepted])
        accepted = set(verdict.accepted)
        nodes = [DraftNode(candidates[i], n.parent, n.depth, n.rank,
                           float(drafts.probs[n.depth - 1, n.rank]) if n.rank != NGRAM_RANK else 0.0,
                           n.has_group, ACCEPTED if i in accepted else REJECTED, trie.sources[i],
                           chances[i] if chances and i < len(chances) else None)
                 for i, n in enumerate(trie.tree.nodes)]
        record = StepRecord(index=index, kind="tree", position=state.context_length, root=state.root,
                            rows=layout.rows, nodes=nodes, accepted=[candidates[i] for i in verdict.accepted],
                            bonus=verdict.bonus, next_drafts=next_drafts.as_lists() if next_drafts else [],
                            n_prompt=adapter.n_prompt, sampled=not sampling.greedy)
        attach_attention(record, layout, adapter.n_prompt, state.context_length, record_attention)
        new_state = DecodeState(state.cache, state.context_length + 1 + len(verdict.accepted),
                                verdict.bonus, next_drafts)
        return new_state, record
    return _timed_record(model, run)


def attach_attention(record: StepRecord, layout: PassLayout, n_prompt: int, n_cached: int, wanted: bool) -> None:
    """When ``wanted``, set ``record.attention`` and ``record.row_kinds`` for a pass of ``layout``."""
    if not wanted:
        return
    record.attention = allowed_keys(layout, n_prompt, n_cached)
    kinds = ["context"] * (layout.chain - 1) + ["root"] + ["candidate"] * layout.tree.size
    record.row_kinds = kinds + ["mask"] * (layout.rows - len(kinds))


def forget_emitted(noise: RaceNoise | None, state: DecodeState) -> None:
    """Every position up to ``state``'s root is emitted: ``noise`` drops their vectors."""
    if noise is not None:
        noise.forget(state.context_length + 1)


def bita_steps(model: nn.Module, adapter: BitaAdapter, prompt_ids: list[int], tree: DraftTree | DynamicShape,
               stop: StopCondition, record_attention: bool = False, ngram_tokens: int = 0,
               ngram_groups: str = GROUPS_NONE, sampling: Sampling = GREEDY, corpus: CorpusIndex | None = None,
               corpus_tokens: int | Sequence[int] = 0, coupling: Coupling = per_position) -> Iterator[StepRecord]:
    """BiTA generation, one StepRecord per forward pass, until ``stop`` says so.

    ``tree``: the mask tree (EMPTY_TREE: no mask drafts), or a dynamic shape (a tree per pass).
    ``ngram_tokens`` > 0 adds to every pass the n-gram chain of up to that many tokens looked up in
    prompt + output (bita/drafts/ngram.py); ``corpus`` with ``corpus_tokens`` > 0 the chain of up to
    that many tokens (or, a sequence, ``corpus_tokens[match length]``: a gate) that continued the
    longest match of prompt + output's end in the corpus (bita/drafts/corpus.py).
    ``sampling``: greedy (the output equals greedy AR token for token) or sampled, the output then
    equal token for token to sampled AR's with the same settings and seed (``ar_steps``): one race
    noise for this run, seeded from ``sampling.seed``, its vectors by position (``coupling``: only a
    test changes it, to see a wrong one fail).
    """
    noise = sampling.noise(len(prompt_ids), device_of(model))
    # made before the first timed pass, with room for the whole request: a pooled buffer records its graphs here
    cache = new_cache(model, adapter, len(prompt_ids) + stop.max_new_tokens)
    try:
        state, record = prefill(model, adapter, prompt_ids, tree, record_attention, sampling, noise, cache)
        record.emitted, record.finish = stop.take([record.bonus])
        forget_emitted(noise, state)
        history = NgramIndex(prompt_ids + [record.bonus], MAX_MATCH if ngram_tokens else 0)  # 0: the tokens alone
        any_chain = corpus_tokens if isinstance(corpus_tokens, int) else any(corpus_tokens)
        yield record
        index = 1
        while record.finish is None:
            ngram = history.propose(ngram_tokens) if ngram_tokens else ()
            chain = corpus.propose(history.tokens, corpus_tokens)[0] if corpus is not None and any_chain else ()
            state, record = tree_step(model, adapter, state, tree, index, record_attention, ngram, ngram_groups,
                                      sampling, noise, chain, coupling)
            record.emitted, record.finish = stop.take(record.accepted + [record.bonus])
            forget_emitted(noise, state)
            history.extend(record.accepted + [record.bonus])
            index += 1
            yield record
    finally:
        release_cache(model, cache)

