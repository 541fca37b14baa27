"""What calibration records of the chains a pass would add: pure, no model."""

import torch

from bita.drafts.corpus import CorpusIndex
from bita.drafts.ngram import NgramIndex
from bita.model.rank_stats import acceptance_record, corpus_rates
from bita.training.calibration import chain_outcomes


def test_each_anchor_scores_the_chains_that_the_next_pass_would_draft():
    sequence = [1, 2, 3, 4, 1, 2, 3, 5, 6, 7, 8]
    corpus = CorpusIndex.build([[2, 3, 5, 6, 9], [0, 5, 6, 7, 8]])
    outcomes = chain_outcomes(sequence, list(range(len(sequence) - 2)), corpus, chain=4)
    for anchor, (proposed, right, found, found_right, match) in enumerate(outcomes):
        history, truth = sequence[:anchor + 2], sequence[anchor + 2:]
        ngram = NgramIndex(history).propose(4)
        chain, length = corpus.propose(history, 4)
        assert (proposed, found, match) == (len(ngram), len(chain), length)
        for drafted, count in ((ngram, right), (chain, found_right)):
            assert drafted[:count] == truth[:count] and (count == len(drafted) or count == len(truth)
                                                         or drafted[count] != truth[count])
    assert outcomes[5][2:] == (3, 2, 2)  # after 1 2 3 the corpus's "2 3" went on 5 6 9; the answer 5 6 7
    assert all(o[2:] == (0, 0, -1) for o in chain_outcomes(sequence, [0, 3]))  # no corpus


def test_corpus_rates_are_per_match_length_the_share_right_to_each_depth():
    chains = torch.tensor([[0, 0, 3, 2, 4], [0, 0, 3, 0, 4], [0, 0, 0, 0, 1], [0, 0, 4, 4, 2]])
    rates = corpus_rates(chains)
    assert len(rates) == 5 and rates[0] == rates[3] == [0.0] * 16
    assert rates[4][:3] == [0.5, 0.5, 0.0] and rates[2][:5] == [1.0, 1.0, 1.0, 1.0, 0.0]
    ranks, probs = torch.zeros(4, 3, dtype=torch.long), torch.full((4, 3, 8), 0.1)
    assert "corpus" in acceptance_record(ranks, probs, chains)
    assert "corpus" not in acceptance_record(ranks, probs, torch.tensor([[1, 1, 0, 0, -1]] * 4))
