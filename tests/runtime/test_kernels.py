"""The planned linear paths: each gives stock outputs, BiTA is lossless on a plan that mixes them (one
path for the layers, another for the head), stock autograd, a way back to stock kernels on the same model,
and no-ops where they do not apply."""

import pytest
import torch
from conftest import TINY_CONFIGS, random_prompts, tiny_model
from gguf import GGMLQuantizationType
from gguf_weights import hold_in_blocks
from torch import nn

from bita.decode.autoregressive import ar_steps
from bita.decode.hf_reference import hf_generate
from bita.decode.step import Decoding, bita_steps
from bita.decode.stopping import StopCondition
from bita.drafts.tree import parse_tree_spec
from bita.errors import BitaError
from bita.model.adapter import BitaAdapter
from bita.runtime.build import prepare
from bita.runtime.hf_attention import ROW_INVARIANT
from bita.runtime import native
from bita.runtime.kernel_plan import BLOCKS, BLOCKS_Q8, NATIVE, PACKED, STOCK, TRANSPOSED, KernelPlan, PlannedLinear
from bita.runtime.kernels import PlannedForward, allowed_paths, apply_kernels, block_paths, stock_kernels
from bita.runtime.layer_masks import additive_mask
from bita.training.objective import SarObjective, make_batch

PLANS = {
    "transposed": KernelPlan(TRANSPOSED, TRANSPOSED),
    "packed": KernelPlan(PACKED, PACKED),
    "mixed": KernelPlan(TRANSPOSED, PACKED),  # the layers on one path, the head on another
}


def planned_model(arch: str, plan: KernelPlan | None = None) -> nn.Module:
    """A fresh tiny model on ``plan``'s paths, or on the plan measured here (the session fixture
    ``tiny`` stays stock)."""
    model = tiny_model(arch)
    installed, ours = apply_kernels(model, "auto", plan=plan)
    assert installed is not None and ours
    return model


def planned(model: nn.Module) -> bool:
    """Whether ``model``'s linears run planned paths."""
    return any(isinstance(vars(m).get("forward"), PlannedForward) for m in model.modules())


def random_mask(rows: int, generator: torch.Generator) -> torch.Tensor:
    """A custom additive 4-D mask [1, 1, rows, rows] like a tree pass's: causal, some keys hidden."""
    allowed = (torch.rand(rows, rows, generator=generator) < 0.6).tril() | torch.eye(rows, dtype=torch.bool)
    return additive_mask(allowed, torch.float32, "cpu")


@pytest.mark.parametrize("plan", [*PLANS, "measured"])
@pytest.mark.parametrize("arch", sorted(TINY_CONFIGS))
def test_every_path_gives_stock_logits(arch, plan):
    model = planned_model(arch, PLANS.get(plan))
    generator = torch.Generator().manual_seed(0)
    for rows, masked in ((1, False), (2, False), (6, True), (20, True), (20, False), (200, False)):
        input_ids = torch.randint(3, 500, (1, rows), generator=generator)
        mask = random_mask(rows, generator) if masked else None
        with torch.inference_mode():
            fast = model(input_ids=input_ids, attention_mask=mask).logits
            with stock_kernels(model):
                stock = model(input_ids=input_ids, attention_mask=mask).logits
        torch.testing.assert_close(fast, stock, atol=1e-4, rtol=1e-4)
        assert torch.equal(fast.argmax(-1), stock.argmax(-1))


@pytest.mark.parametrize("spec", ["efficient:3,2,2", "chain:1", "efficient:3/chain-groups"])
def test_bita_is_lossless_on_a_plan_that_mixes_paths(spec):
    runtime = prepare(tiny_model("llama"), "auto", plan=PLANS["mixed"], lean=False)  # transformers' path
    model = runtime.model
    adapter = BitaAdapter.create(model, prompt_tokens=8, mask_tokens=3, seed=0)
    for prompt in random_prompts(4, seed=13):
        reference = hf_generate(model, prompt, 24, [])
        assert [t for r in ar_steps(runtime, prompt, StopCondition(24)) for t in r.emitted] == reference
        steps = bita_steps(Decoding(runtime, adapter, parse_tree_spec(spec)), prompt, StopCondition(24))
        assert [t for r in steps for t in r.emitted] == reference


def adapter_gradients(model, adapter, batch):
    adapter.zero_grad()
    loss, _, _ = SarObjective(adapter, model)(batch.input_ids, batch.lengths, batch.anchors)
    loss.backward()
    return {name: p.grad.clone() for name, p in adapter.named_parameters()}


def test_training_gradients_are_those_of_stock_kernels():
    """The adapter's gradients flow through the frozen linears: the planned paths must not change them."""
    model = planned_model("llama", PLANS["mixed"])
    adapter = BitaAdapter.create(model, prompt_tokens=4, mask_tokens=3, seed=2)
    samples = [{"prompt_ids": p[:6], "answer_ids": p[6:]} for p in random_prompts(3, seed=4, low=20, high=30)]
    batch = make_batch(samples, n_anchors=4, max_length=64, rng=None, every_anchor=True)
    fast = adapter_gradients(model, adapter, batch)
    with stock_kernels(model):
        stock = adapter_gradients(model, adapter, batch)
    assert fast.keys() == stock.keys() and all(g.abs().sum() > 0 for g in fast.values())
    for name in fast:
        torch.testing.assert_close(fast[name], stock[name], atol=1e-6, rtol=1e-5)


def test_stock_kernels_restores_the_planned_paths():
    model = planned_model("qwen2", PLANS["mixed"])
    linear = model.model.layers[0].mlp.up_proj
    assert planned(model) and "forward" in vars(linear)
    assert model.config._attn_implementation == ROW_INVARIANT["sdpa"]
    with stock_kernels(model):
        assert not planned(model) and "forward" not in vars(linear)
        assert linear.forward.__func__ is nn.Linear.forward
        assert model.model.layers[0].self_attn.config._attn_implementation == "sdpa"
    assert "forward" in vars(linear) and model.config._attn_implementation == ROW_INVARIANT["sdpa"]
    with pytest.raises(RuntimeError), stock_kernels(model):
        raise RuntimeError("an error inside the block")
    assert "forward" in vars(linear), "the planned paths come back even when the block fails"


def test_planning_leaves_parameters_and_state_dict_alone():
    model, reference = tiny_model("llama"), tiny_model("llama")
    apply_kernels(model, "auto", plan=PLANS["mixed"])
    assert model.state_dict().keys() == reference.state_dict().keys()
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), reference.parameters()))


class QuantisedLinear(nn.Linear):
    """Stands for a bitsandbytes layer: a subclass of nn.Linear with its own forward."""


def test_auto_is_a_no_op_where_it_does_not_apply():
    stock = tiny_model("llama")
    assert apply_kernels(stock, "stock") == (None, False) and not planned(stock)
    assert stock.config._attn_implementation == "sdpa"
    half = tiny_model("llama").half()
    assert apply_kernels(half, "auto") == (None, False) and not planned(half)
    with torch.device("meta"):  # weights off the CPU, as on a GPU: nothing to pack
        off_cpu = nn.Sequential(nn.Linear(8, 8))
    assert apply_kernels(off_cpu, "auto") == (None, False) and "forward" not in vars(off_cpu[0])
    quantised = nn.Sequential(QuantisedLinear(8, 8), nn.Linear(8, 8))
    assert apply_kernels(quantised, "auto")[0] is not None
    assert "forward" not in vars(quantised[0]) and "forward" in vars(quantised[1])
    with pytest.raises(Exception, match="unknown kernels"):
        apply_kernels(tiny_model("llama"), "fast")


def test_bfloat16_packs_only_where_this_cpu_can():
    model = tiny_model("llama").to(torch.bfloat16)
    plan, _ = apply_kernels(model, "auto")
    assert planned(model) == (plan is not None)
    input_ids = torch.randint(3, 500, (1, 6))
    with torch.inference_mode():
        fast = model(input_ids=input_ids).logits.float()
        with stock_kernels(model):
            stock = model(input_ids=input_ids).logits.float()
    torch.testing.assert_close(fast, stock, atol=0.1, rtol=0.05)


def test_planning_twice_keeps_our_attention():
    """Kernels installed again on a model that has them (a second load of the same object) still report our
    attention, so its runtime still attends token rows exactly."""
    model = planned_model("qwen2", PLANS["packed"])
    assert apply_kernels(model, "auto", plan=PLANS["packed"]) == (PLANS["packed"], True)
    with stock_kernels(model):
        assert model.config._attn_implementation == "sdpa"
    assert model.config._attn_implementation == ROW_INVARIANT["sdpa"]


def weight_bytes(runtime) -> tuple[int, int]:
    """(bytes of the model's parameters, bytes of every distinct storage a runtime's weights and their planned copies
    hold): the model's parameters, the lean forward's products and their copies, the modules' planned copies."""
    storages: dict[int, int] = {}

    def hold(tensor):
        if tensor is not None:
            storages[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()

    parameters = {p.untyped_storage().data_ptr(): p.untyped_storage().nbytes() for p in runtime.model.parameters()}
    for tensor in runtime.model.parameters():
        hold(tensor)
    for layer in getattr(runtime.forward, "layers", ()):
        for part in layer:
            if isinstance(part, PlannedLinear):
                hold(part.weight), hold(part.copy)
    for module in runtime.model.modules():
        forward = vars(module).get("forward")
        if isinstance(forward, PlannedForward) and forward.planned is not None:
            hold(forward.planned.copy)
    return sum(parameters.values()), sum(storages.values())


@pytest.mark.parametrize("lean", [True, False])
def test_each_weight_is_held_once_beside_the_copy_its_path_reads(lean):
    """Planned copies only where the chosen forward runs them: the lean forward's fused products (the modules'
    weights views of them) and the head's, not a second set on the modules the lean forward never calls; on
    transformers' path the modules' own. A second copy coming back fails this."""
    runtime = prepare(tiny_model("llama"), "auto", plan=PLANS["transposed"], lean=lean)
    list(ar_steps(runtime, random_prompts(1, seed=0)[0], StopCondition(max_new_tokens=4)))
    parameters, held = weight_bytes(runtime)
    assert runtime.forward.kind.startswith("lean") == lean
    assert held <= 2.02 * parameters, f"{held / parameters:.2f}x the parameters' bytes"


def test_eight_bit_activations_are_offered_only_where_asked_for_or_left_to_the_measurement():
    """8-bit activations change the tokens: a plan takes BLOCKS_Q8 only with --dtype auto (``eight_bit``) or
    --weights blocks-q8; --weights blocks keeps to the blocks paths where every layer is held in blocks."""
    offered = (STOCK, PACKED, BLOCKS, BLOCKS_Q8)
    assert allowed_paths(offered, "auto", eight_bit=False, all_blocks=True) == (STOCK, PACKED, BLOCKS)
    assert allowed_paths(offered, "auto", eight_bit=True, all_blocks=True) == offered
    assert allowed_paths(offered, "blocks", eight_bit=False, all_blocks=True) == (BLOCKS,)
    assert allowed_paths(offered, "blocks", eight_bit=True, all_blocks=True) == (BLOCKS, BLOCKS_Q8)
    assert allowed_paths(offered, "blocks", eight_bit=False, all_blocks=False) == (STOCK, PACKED, BLOCKS)
    assert allowed_paths(offered, "blocks-q8", eight_bit=False, all_blocks=True) == (BLOCKS_Q8,)
    assert block_paths("blocks-q8", eight_bit=True) == (BLOCKS_Q8,)
    with pytest.raises(BitaError, match="blocks-q8 reads a GGUF's blocks against 8-bit activations"):
        allowed_paths((STOCK, BLOCKS), "blocks-q8", eight_bit=True, all_blocks=True)


@pytest.mark.skipif(native.KERNELS[BLOCKS_Q8].unavailable() is not None, reason="no 8-bit-activation kernel here")
@pytest.mark.parametrize("weights,eight_bit,expected", [("blocks", False, {BLOCKS}), ("blocks-q8", False, {BLOCKS_Q8}),
                                                        ("blocks", True, {BLOCKS, BLOCKS_Q8})])
def test_a_measured_plan_on_blocks_keeps_to_the_arithmetic_allowed(tmp_path, weights, eight_bit, expected):
    model = hold_in_blocks(tiny_model("llama"), tmp_path, GGMLQuantizationType.Q4_1)
    plan, _ = apply_kernels(model, "auto", weights=weights, eight_bit=eight_bit)
    assert plan.layers in expected and plan.head in expected | {STOCK, PACKED, TRANSPOSED, NATIVE}
