"""The GPU check's scripts' one argument parser: ``--model`` (default: the embedded default) loaded on the GPU in
``--dtype`` (default bfloat16)."""
import argparse

from bita.model.loading import LoadedModel, load_model


def loaded_from_arguments(description: str) -> LoadedModel:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--model", default="default")
    parser.add_argument("--dtype", default="bfloat16")
    args = parser.parse_args()
    return load_model(args.model, device="cuda", dtype=args.dtype)
