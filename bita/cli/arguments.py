"""Options shared by the commands (and the app): the model to load, what drafts, how to sample."""

from __future__ import annotations

import argparse

from ..drafts.sources import DEFAULT_DRAFTS, DRAFT_OPTIONS
from ..plan.tree_plan import DEFAULT_NGRAM_TOKENS, DEFAULT_TREE
from ..runtime.kernels import KERNELS, KERNELS_HELP, WEIGHTS, WEIGHTS_HELP

ADAPTER_HELP = ("an adapter: a directory, a shipped adapter's name, a Hub repository USER/NAME (from the local "
                "Hugging Face cache, else downloaded), or 'untrained' (default: the shipped adapter made for the "
                "model, else untrained)")


class DefaultsShown(argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` with each option's default, where it has one its help does not already tell."""

    def _get_help_string(self, action: argparse.Action) -> str:
        help_text = action.help or ""
        if action.default is None or action.default is False or action.default == [] or "default" in help_text:
            return help_text
        return super()._get_help_string(action)


def show_defaults(parser: argparse.ArgumentParser) -> None:
    """Give ``parser`` and every sub-command's parser under it the DefaultsShown formatter."""
    parser.formatter_class = DefaultsShown
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                show_defaults(sub)


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="default",
                        help="'default' (embedded SmolLM2-135M-Instruct), a hub id in the HF cache, a checkpoint "
                             "folder, a .gguf file or a folder holding one (de-quantised once, cached), or "
                             "gemma-3-270m-q4_k_m.gguf (from its package)")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:N")
    parser.add_argument("--dtype", default="auto",
                        help="auto (CUDA: bf16; CPU: bf16 where bf16 hardware or the native kernels run here, its "
                             "passes are proved row-invariant and it is measured faster, else fp32; measured once: "
                             "bita measure), float32, bfloat16, float16")
    parser.add_argument("--quantize", type=int, choices=(4, 8), help="load in 4 or 8 bits (bitsandbytes, CUDA only)")
    parser.add_argument("--kernels", choices=KERNELS, default="auto", help=KERNELS_HELP)


def add_weights_argument(parser: argparse.ArgumentParser) -> None:
    """``--weights``, for the commands that decode (training takes dense weights)."""
    parser.add_argument("--weights", choices=WEIGHTS, default="auto", help=WEIGHTS_HELP)


def load_from(args: argparse.Namespace):
    """The model named by ``add_model_arguments``' options (and ``--weights``, where the command has it: else
    dense)."""
    from ..model.loading import load_model

    return load_model(args.model, args.device, args.dtype, args.quantize, args.kernels,
                      getattr(args, "weights", "dense"))


def add_draft_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tree", default=DEFAULT_TREE, help="mask draft tree: auto (the fastest shape on this "
                        "device; where none pays, plain AR, or n-gram chains alone with --drafts both), or a shape: "
                        "efficient:3,2,2, chain:3, full:2,2,2, ...")
    parser.add_argument("--drafts", choices=DRAFT_OPTIONS, default=DEFAULT_DRAFTS,
                        help="who drafts: the adapter's mask groups, context n-grams (prompt lookup), both "
                             "merged in one tree, or all: both plus a corpus chain (the model's own past answers)")
    parser.add_argument("--ngram-tokens", type=int, default=DEFAULT_NGRAM_TOKENS,
                        help="n-gram (and corpus) chain length per pass (with --drafts ngram, both or all)")
    parser.add_argument("--corpus", help="texts the corpus chain continues (plain text, or JSONL with 'text'; "
                             "with --drafts all; default: the answers the adapter was trained on)")


def add_sampling_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--temperature", type=float, default=0.0, help="0 (default): greedy, identical to greedy "
                        "AR; above 0: sampled from exactly the AR distribution")
    parser.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass, in (0, 1] (1: off)")
    parser.add_argument("--top-k", type=int, default=0, help="sample among the k likeliest tokens (0: off)")
    parser.add_argument("--seed", type=int, help="seed of the run's random generator (default: a random one, "
                        "reported)")


def sampling_from(args: argparse.Namespace):
    """The Sampling that ``add_sampling_arguments``' options ask for (BitaError when absurd)."""
    from ..decode.sampling import Sampling

    return Sampling(args.temperature, args.top_p, args.top_k, args.seed)
