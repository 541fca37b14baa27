"""BiTA decoding with a KV cache: prefill, then one verify-and-draft forward pass per step.

The cache holds ``[P prompt slots | accepted context]``. Each pass appends its new rows,
then keeps exactly the root and the accepted candidates (gathered in place, then cropped).

A pass, step by step: the candidates (``draft_candidates``: the mask tree, or a dynamic tree for this
pass's drafts, merged with the chains into one trie), the rows (``forward_layout`` on the model's
runtime), the logits and the verdict (pass_logits.py), the cache kept to the accepted path, and the step
record (records.py). A mask group has only ``tree.depth`` masks, not the adapter's n: mask i sees only
masks before it, so later masks would draft depths the tree never uses.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch

from ..drafts.corpus import CorpusIndex
from ..drafts.dynamic import DynamicShape, dynamic_tree
from ..drafts.ngram import MAX_MATCH, NgramIndex
from ..drafts.tree import EMPTY_TREE, DraftTree
from ..drafts.trie import GROUPS_NONE, build_trie
from ..model.adapter import BitaAdapter
from ..runtime.device import PassTimer, long_tensor, synchronize, timed, to_device
from ..runtime.runtime import Cache, Runtime
from ..runtime.token_rows import TokenRows
from .explain import pass_verdicts, row_verdicts
from .mask_drafts import raced_vectors
from .masks import PassLayout, allowed_keys, decode_layout
from .pass_logits import Drafts, Judgement, PassLogits, drafts_from, pass_logits, queue_judgement
from .records import Candidates, StepRecord, attach_attention, tree_record
from .sampling import GREEDY, RaceNoise, Sampling, next_token
from .stopping import StopCondition
from .verify import Coupling, RowNoise, Verification, ahead_of, per_position


@dataclass(frozen=True)
class Chains:
    """The chains every pass drafts beside the mask tree, looked up in prompt + output (the default: none).
    ``ngram_tokens`` > 0: the n-gram chain of up to that many tokens (bita/drafts/ngram.py), mask groups hung
    on the nodes only it proposed as ``ngram_groups`` says (bita/drafts/trie.py); ``corpus`` with
    ``corpus_tokens`` > 0: the chain of up to that many tokens (or, a sequence, ``corpus_tokens[match
    length]``: a gate) that continued the longest match of prompt + output's end in the corpus
    (bita/drafts/corpus.py)."""

    ngram_tokens: int = 0
    ngram_groups: str = GROUPS_NONE
    corpus: CorpusIndex | None = None
    corpus_tokens: int | Sequence[int] = 0


@dataclass(frozen=True)
class Decoding:
    """How BiTA drafts and verifies on ``runtime`` with ``adapter``, the same at every pass of a run (and of
    any run: a run's own state is its ``DecodeState``). ``tree``: the mask tree (EMPTY_TREE: no mask
    drafts), or a dynamic shape (a tree per pass); ``sampling``: greedy, or sampled with the run's race
    noise, ``coupling`` handing a pass its vectors (only a test changes it, to see a wrong one fail);
    ``chains``: what drafts beside the tree; ``record_attention``: records carry each pass's attention mask;
    ``record_verdicts``: what the verifier said of each emitted token (bita/decode/explain.py; off where runs
    are timed against each other); ``overlap``: how ``bita_steps`` schedules its passes (the tokens are the
    same either way)."""

    runtime: Runtime
    adapter: BitaAdapter
    tree: DraftTree | DynamicShape
    sampling: Sampling = GREEDY
    chains: Chains = Chains()
    coupling: Coupling = per_position
    record_attention: bool = False
    record_verdicts: bool = False
    overlap: bool | None = None  # launch each pass before the last one's record is built; None: on a GPU

    @property
    def overlaps(self) -> bool:
        """Whether ``bita_steps`` launches pass k + 1 before handing over pass k's record: where the device runs
        queued work while the host goes on (a GPU), unless ``overlap`` says otherwise (a test on a CPU)."""
        return self.runtime.device.type == "cuda" if self.overlap is None else self.overlap


@dataclass
class DecodeState:
    cache: Cache
    context_length: int  # ordinary tokens in the cache (prompt slots excluded)
    root: int  # last emitted token: fed, and cached, by the next pass
    drafts: Drafts | None  # None when the last accepted node carried no mask group, or masks are off
    noise: RaceNoise | None = None  # the run's race vectors by position (None: greedy)

    def rewind(self, n_prompt: int, drafts: Drafts | None) -> None:
        """Drop what later passes appended to this state's cache (a pass grows the cache in place) and
        draft with ``drafts`` next: to time one pass shape again and again from the same state."""
        self.cache.crop(-(self.cache.get_seq_length() - n_prompt - self.context_length))
        self.drafts = drafts

    def forget_emitted(self) -> None:
        """Every position up to the root is emitted: the noise drops their vectors."""
        if self.noise is not None:
            self.noise.forget(self.context_length + 1)


@torch.inference_mode()
def new_cache(runtime: Runtime, adapter: BitaAdapter | None = None, rows: int = 0) -> Cache:
    """An empty cache for ``runtime`` with ``adapter``'s prompt key/values in its first P slots and room for
    ``rows`` slots past them. Give it back with ``runtime.release``."""
    return runtime.new_cache(adapter.prompt_key_values(runtime.model, runtime.dtype) if adapter else (), rows)


def forward_layout(runtime: Runtime, adapter: BitaAdapter, cache: Cache, layout: PassLayout,
                   ordinary_tokens: torch.Tensor, position: int, context_length: int) -> torch.Tensor:
    """Run the new rows of ``layout`` through the frozen model, appending them to ``cache``.

    ordinary_tokens: [chain + tree.size] token ids (on the host: a padded pass stages them with its positions);
    mask rows use the adapter's embeddings. position: position of the root row. Returns last hidden states [R, H].
    """
    rows = TokenRows(ordinary_tokens, adapter.mask_rows(layout.n_masks, runtime.dtype, runtime.device),
                     len(layout.tree.group_anchors))
    return runtime.run(cache, rows, position + layout.position_offsets,
                       allowed_keys(layout, adapter.n_prompt, context_length), len(ordinary_tokens))


def draft_candidates(decoding: Decoding, drafts: Drafts | None, ngram: Sequence[int] = (),
                     corpus: Sequence[int] = ()) -> Candidates:
    """One pass's candidates: the mask tree (a dynamic shape: the tree its drafts' confidence picks, within
    the rows the chains leave it, bita/drafts/dynamic.py) filled with ``drafts`` (when there are any) and
    merged with the n-gram chain ``ngram`` and the corpus chain ``corpus`` (bita/drafts/trie.py)."""
    tree, chances = decoding.tree, None
    if isinstance(tree, DynamicShape):
        tree, chances = (EMPTY_TREE, []) if drafts is None else dynamic_tree(drafts.probs.tolist(), tree,
                                                                               len(ngram) + len(corpus))
    trie = build_trie(tree, drafts.tokens.tolist() if drafts is not None else None, ngram, decoding.chains.ngram_groups,
                      corpus)
    return Candidates(trie, chances, drafts.probs if drafts is not None else None)


def _timed_record(runtime: Runtime, record_fn: Callable[[], tuple[DecodeState, StepRecord]]
                  ) -> tuple[DecodeState, StepRecord]:
    (state, record), record.seconds = timed(runtime.device, record_fn)
    return state, record


@torch.inference_mode()
def prefill(decoding: Decoding, prompt_ids: list[int], cache: Cache) -> tuple[DecodeState, StepRecord]:
    """Encode the prompt plus one mask group on its last token into ``cache`` (a ``new_cache`` made before
    the timed pass): the first AR token (argmax, or the race winner) and the drafts the tree needs
    (``tree.depth`` depths, top ``tree.max_rank`` each; none for an empty tree). Sampled, the run's race
    noise starts here, seeded from ``sampling.seed``, its first position the prompt's end."""
    runtime, adapter, tree, sampling = decoding.runtime, decoding.adapter, decoding.tree, decoding.sampling
    noise = sampling.noise(len(prompt_ids), runtime.device)

    def run():
        chain = len(prompt_ids)
        layout = decode_layout(EMPTY_TREE, tree.depth, chain)
        logits, pass_seconds = timed(runtime.device, lambda: runtime.logits(forward_layout(
            runtime, adapter, cache, layout, long_tensor(prompt_ids), chain - 1, 0)[chain - 1:]))  # last row, group
        bonus = next_token(logits[0], sampling, noise, chain)
        drafts = None
        if tree.depth:  # sampled, raced with the vectors of the positions after the bonus
            ahead = None if noise is None else ahead_of(noise, chain)
            drafts = drafts_from(logits[1:], tree.max_rank, sampling,
                                 raced_vectors(ahead, 0, tree.depth, logits.shape[-1]))
        cache.keep(adapter.n_prompt, list(range(chain)))
        record = StepRecord(index=0, kind="prefill", position=chain - 1, root=prompt_ids[-1], rows=layout.rows,
                            bonus=bonus, next_drafts=drafts.as_lists() if drafts else [], n_prompt=adapter.n_prompt,
                            sampled=not sampling.greedy, pass_seconds=pass_seconds)
        attach_attention(record, layout, adapter.n_prompt, 0, decoding.record_attention)
        if decoding.record_verdicts:
            drawn = [noise.vector(chain, logits.shape[-1])] if noise is not None else ()
            record.verdicts = row_verdicts(logits[:1], [bonus], [[]], sampling, runtime.dtype, drawn)
        return DecodeState(cache, chain, bonus, drafts, noise), record
    return _timed_record(runtime, run)


@dataclass
class LaunchedPass:
    """A tree pass queued on the device with its LM head and (on a GPU) its verdict: on a GPU it may still run, on a
    CPU it is done. What settling it needs."""

    state: DecodeState  # the state the pass was launched from
    candidates: Candidates
    layout: PassLayout
    logits: PassLogits
    noise: RowNoise | None  # the rows' race vectors (sampled), else None
    judgement: Judgement  # gives the verdict and the next drafts: on a GPU, waits for the device once
    timer: PassTimer  # started once its candidates and layout were made, stopped once its head was queued


@dataclass
class SettledPass:
    """A launched pass once its verdict came back: the state after it (its cache kept to the accepted path)."""

    launched: LaunchedPass
    verdict: Verification
    state: DecodeState  # its ``drafts``: the next pass's
    verdicts: list | None  # what the verifier said of each token (``record_verdicts``), read before the next pass


def launch_pass(decoding: Decoding, state: DecodeState, ngram: Sequence[int] = (),
                corpus: Sequence[int] = ()) -> LaunchedPass:
    """Queue the pass after ``state``: root + candidates (``draft_candidates`` with the chains ``ngram`` and
    ``corpus``) + mask groups, its LM head and its verdict (``queue_judgement``). Nothing here waits for the device
    (its copies are pinned and non-blocking): on a GPU the host returns while the pass runs."""
    runtime, sampling, length = decoding.runtime, decoding.sampling, state.context_length
    candidates = draft_candidates(decoding, state.drafts, ngram, corpus)
    trie = candidates.trie
    layout = decode_layout(trie.tree, decoding.tree.depth, 1)
    timer = PassTimer(runtime.device)  # no wait at the pass's end: the verdict's work queues behind it
    timer.start()
    ids = long_tensor([state.root, *trie.tokens])
    logits = pass_logits(runtime, forward_layout(runtime, decoding.adapter, state.cache, layout, ids, length, length),
                         layout, 1 + trie.tree.size)
    timer.stop()
    noise = None if sampling.greedy else decoding.coupling(state.noise, trie.tree, length + 1)
    ahead = None if sampling.greedy else ahead_of(state.noise, length + 1)  # the next drafts race with these
    judgement = queue_judgement(trie, layout, logits, decoding.tree, sampling, noise,
                                to_device(ids[1:], runtime.device), ahead)  # ids sent behind the pass, for the walk
    return LaunchedPass(state, candidates, layout, logits, noise, judgement, timer)


def settle_pass(decoding: Decoding, launched: LaunchedPass) -> SettledPass:
    """A launched pass's verdict (its ``judgement``: the tokens emitted are AR's, greedy or with the same seed; on
    a GPU the one wait for the device a step), with the accepted path kept in the cache; the next drafts are the
    mask group's most probable, or (sampled) raced (bita/decode/mask_drafts.py)."""
    state, trie, layout, sampling = launched.state, launched.candidates.trie, launched.layout, decoding.sampling
    length = state.context_length
    verdict, next_drafts = launched.judgement()
    state.cache.keep(decoding.adapter.n_prompt + length, [0] + [layout.node_row(i) for i in verdict.accepted])
    verdicts = pass_verdicts(launched.logits.verified, trie.tree, trie.tokens, verdict, sampling,
                             decoding.runtime.dtype, launched.noise) if decoding.record_verdicts else None
    after = DecodeState(state.cache, length + 1 + len(verdict.accepted), verdict.bonus, next_drafts, state.noise)
    return SettledPass(launched, verdict, after, verdicts)


def pass_record(decoding: Decoding, settled: SettledPass, index: int) -> StepRecord:
    """The record of settled tree pass ``index`` (host work only: on a GPU it is built while the next pass runs)."""
    launched, verdict, next_drafts = settled.launched, settled.verdict, settled.state.drafts
    state, layout, n_prompt = launched.state, launched.layout, decoding.adapter.n_prompt
    record = tree_record(index=index, position=state.context_length, root=state.root, candidates=launched.candidates,
                         verdict=verdict, next_drafts=next_drafts.as_lists() if next_drafts else [],
                         rows=layout.rows, n_prompt=n_prompt, sampled=not decoding.sampling.greedy)
    record.pass_seconds = launched.timer.seconds()
    attach_attention(record, layout, n_prompt, state.context_length, decoding.record_attention)
    if settled.verdicts is not None:
        record.verdicts = settled.verdicts
    return record


@torch.inference_mode()
def tree_step(decoding: Decoding, state: DecodeState, index: int, ngram: Sequence[int] = (),
              corpus: Sequence[int] = ()) -> tuple[DecodeState, StepRecord]:
    """One tree pass after ``state``, launched, settled and recorded in turn (device-synchronised ``seconds``): to
    time one pass shape (plan/costs.py). ``bita_steps`` runs the same three parts, overlapped on a GPU."""

    def run():
        settled = settle_pass(decoding, launch_pass(decoding, state, ngram, corpus))
        return settled.state, pass_record(decoding, settled, index)
    return _timed_record(decoding.runtime, run)


@torch.inference_mode()
def bita_steps(decoding: Decoding, prompt_ids: list[int], stop: StopCondition) -> Iterator[StepRecord]:
    """BiTA generation after ``prompt_ids`` as ``decoding`` says, one StepRecord per forward pass, until
    ``stop`` says so. Sampled, the output equals sampled AR's (``ar_steps``) with the same settings and seed:
    one race noise for this run, seeded from ``sampling.seed``, its vectors by position.

    Where ``decoding.overlaps`` (a GPU), pass k + 1 is launched as soon as pass k's verdict is in, before pass k's
    record is built and handed over: the record, and whatever the caller does with it, run while the device runs
    the next pass. A record's ``seconds`` is then the time its caller waited in this generator for it (what the
    caller sees: their sum is the run's time without the caller's own), no longer the pass's own; a run that stops
    launches no pass past its stop."""
    runtime, adapter, chains = decoding.runtime, decoding.adapter, decoding.chains
    ngram_tokens, corpus, corpus_tokens = chains.ngram_tokens, chains.corpus, chains.corpus_tokens
    any_chain = corpus is not None and (corpus_tokens if isinstance(corpus_tokens, int) else any(corpus_tokens))
    # made before the first timed pass, with room for the whole run: a pooled buffer records its graphs here
    cache = new_cache(runtime, adapter, len(prompt_ids) + stop.max_new_tokens)
    try:
        state, record = prefill(decoding, prompt_ids, cache)
        record.emit(*stop.take([record.bonus]))
        state.forget_emitted()
        history = NgramIndex(prompt_ids + [record.bonus], MAX_MATCH if ngram_tokens else 0)  # 0: the tokens alone

        def launch(after: DecodeState) -> LaunchedPass:
            ngram = history.propose(ngram_tokens) if ngram_tokens else ()
            chain = corpus.propose(history.tokens, corpus_tokens)[0] if any_chain else ()
            return launch_pass(decoding, after, ngram, chain)
        yield record
        index, finish, launched = 1, record.finish, None
        while finish is None:
            started = time.perf_counter()
            settled = settle_pass(decoding, launched or launch(state))
            trie_tokens, verdict = settled.launched.candidates.trie.tokens, settled.verdict
            tokens = [trie_tokens[i] for i in verdict.accepted] + [verdict.bonus]
            kept, finish = stop.take(tokens)
            state = settled.state
            state.forget_emitted()
            history.extend(tokens)
            launched = launch(state) if decoding.overlaps and finish is None else None
            record = pass_record(decoding, settled, index)
            record.emit(kept, finish)
            if not decoding.overlaps:
                synchronize(runtime.device)
            record.seconds = time.perf_counter() - started
            index += 1
            yield record
    finally:
        runtime.release(cache)
