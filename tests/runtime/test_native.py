"""The native kernel path (bita/runtime/native.py, native_linear.c): the linear it computes, a row's result the
same whatever the pass's row count, one clear reason where it cannot be built, a build only in a private folder that
loads without a compiler once built and remembers a failed compile, and wrappers that refuse tensors they cannot
take."""

import shutil
import stat
import time

import pytest
import torch
import torch.nn.functional as F
from conftest import forget_native

from bita.runtime import native
from bita.runtime.kernel_plan import NATIVE, row_floor, run_path, weight_copy

needs_native = pytest.mark.skipif(native.unavailable() is not None, reason=str(native.unavailable()))
DTYPES = [torch.float32, torch.bfloat16]


@needs_native
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("out_features", "in_features"), [(40, 24), (33, 7), (96, 130), (5, 1)])
def test_the_native_path_computes_the_linear(dtype, out_features, in_features):
    """Shapes off the kernel's tile (32 outputs) and pairs (odd inputs), with a bias, 0 to 13 rows."""
    generator = torch.Generator().manual_seed(out_features)
    weight = torch.randn(out_features, in_features, generator=generator).to(dtype)
    bias = torch.randn(out_features, generator=generator).to(dtype)
    packed = native.pack(weight)
    for rows in (0, 1, 2, 6, 7, 13):
        x = torch.randn(rows, in_features, generator=generator).to(dtype)
        expected = F.linear(x.double(), weight.double(), bias.double())
        out = native.linear(x, packed, bias, out_features)
        assert out.dtype == dtype and out.shape == (rows, out_features)
        tolerance = 1e-5 if dtype == torch.float32 else 2e-2
        torch.testing.assert_close(out.double(), expected, atol=tolerance * in_features ** 0.5, rtol=tolerance)


@needs_native
@pytest.mark.parametrize("dtype", DTYPES)
def test_a_rows_result_does_not_depend_on_the_passs_other_rows(dtype):
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(200, 576, generator=generator).to(dtype)
    x = torch.randn(64, 576, generator=generator).to(dtype)
    copy = weight_copy(NATIVE, weight)
    whole = run_path(NATIVE, x, weight, None, copy)
    for size in (1, 2, 5, 7, 13):
        for start in range(0, 64 - size + 1, size):
            assert torch.equal(run_path(NATIVE, x[start:start + size], weight, None, copy), whole[start:start + size])
    assert row_floor(NATIVE, weight, None, copy) == 1


def test_without_a_compiler_it_says_why(monkeypatch, tmp_path):
    forget_native(monkeypatch)
    monkeypatch.setattr(native.shutil, "which", lambda name: None)
    assert native.unavailable(tmp_path) == "the native kernel could not be built: no C compiler found (cc, gcc or " \
                                           "clang; or set CC)"
    assert native.pack(torch.randn(4, 4)) is None


@needs_native
@pytest.mark.parametrize("dtype", DTYPES)
def test_the_layer_kernels_compute_what_transformers_computes(dtype):
    """RMSNorm, rotary (in place), SiLU x up and a linear adding the residual, against transformers' torch
    operations: float32 within float rounding, bfloat16 within one bf16 rounding (their sums run in another
    order); rows that are views (apart in memory) and sizes off the vector width."""
    generator = torch.Generator().manual_seed(5)
    wide = torch.randn(6, 600, generator=generator).to(dtype)
    x, weight = wide[:, :580], torch.randn(580, generator=generator).to(dtype)  # rows 600 apart
    rounding = 1e-5 if dtype == torch.float32 else 1e-2
    variance = x.float().pow(2).mean(-1, keepdim=True)
    expected = weight * (x.float() * torch.rsqrt(variance + 1e-5)).to(dtype)
    torch.testing.assert_close(native.rms_norm(x, weight, 1e-5), expected, atol=rounding * 4, rtol=rounding)

    heads = torch.randn(6, 5, 72, generator=generator).to(dtype)  # D 72: 4 lanes past the vector width
    cos, sin = torch.randn(6, 72, generator=generator).to(dtype), torch.randn(6, 72, generator=generator).to(dtype)
    expected = heads * cos[:, None] + torch.cat([-heads[..., 36:], heads[..., :36]], -1) * sin[:, None]
    torch.testing.assert_close(native.rotate_(heads.clone(), cos, sin), expected, atol=rounding * 4, rtol=rounding)

    gate_up = torch.randn(6, 2 * 100, generator=generator).to(dtype)
    expected = F.silu(gate_up[:, :100]) * gate_up[:, 100:]
    torch.testing.assert_close(native.silu_mul(gate_up), expected, atol=rounding * 4, rtol=rounding)

    linear_weight = torch.randn(70, 40, generator=generator).to(dtype)
    inputs, residual = torch.randn(6, 40, generator=generator).to(dtype), torch.randn(6, 70, generator=generator).to(dtype)
    product = native.linear(inputs, native.pack(linear_weight), None, 70)
    assert torch.equal(native.linear(inputs, native.pack(linear_weight), None, 70, residual), residual + product)


def test_the_switch_turns_them_off(monkeypatch, tmp_path):
    forget_native(monkeypatch)
    monkeypatch.setenv(native.SWITCH, "0")
    assert native.unavailable(tmp_path) == "the native kernels are off (BITA_NATIVE=0)"
    assert native.amx_unavailable() == "the native kernels are off (BITA_NATIVE=0)"  # the AMX kernel with them
    assert native.dot_unavailable() == "the native kernels are off (BITA_NATIVE=0)"  # and the dot kernel
    assert native.pack(torch.randn(4, 4).bfloat16(), "amx") is None
    assert not list(tmp_path.iterdir())  # nothing built


def test_the_library_goes_to_a_private_folder_of_the_bita_cache(monkeypatch, tmp_path):
    """No folder given (a caller without a plan file): the cache's native/, created with mode 0o700."""
    forget_native(monkeypatch)
    monkeypatch.setenv("BITA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(native.shutil, "which", lambda name: None)
    assert native.unavailable().endswith("no C compiler found (cc, gcc or clang; or set CC)")
    assert stat.S_IMODE((tmp_path / "cache" / "native").stat().st_mode) == 0o700


@pytest.mark.parametrize("unsafe", ["writable", "foreign"])
def test_a_folder_others_may_write_to_is_refused_in_one_line(monkeypatch, tmp_path, unsafe):
    forget_native(monkeypatch)
    folder = tmp_path / "native"
    folder.mkdir()
    folder.chmod(0o777 if unsafe == "writable" else 0o700)
    if unsafe == "foreign":
        monkeypatch.setattr(native.os, "getuid", lambda: folder.stat().st_uid + 1)
    why = native.unavailable(folder)
    assert why.startswith(f"the native kernel could not be built: {folder} must be yours and writable by you alone")
    assert "\n" not in why
    assert "chmod 700" in why and not list(folder.iterdir())  # nothing built, nothing loaded


def test_a_private_folder_inside_one_others_may_write_to_is_refused_in_one_line(monkeypatch, tmp_path):
    """Whoever may write to a folder above it may swap the library between the check and the load."""
    forget_native(monkeypatch)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # no sticky bit, unlike /tmp
    why = native.unavailable(shared / "native")
    assert f"lies in {shared}, which another user may change" in why and "\n" not in why
    shared.chmod(0o1777)  # as /tmp: others may not swap what is yours
    monkeypatch.setattr(native.shutil, "which", lambda name: None)
    forget_native(monkeypatch)
    assert native.unavailable(shared / "native").endswith("no C compiler found (cc, gcc or clang; or set CC)")


def test_the_name_changes_with_the_sources_the_flags_and_the_cpu(monkeypatch, tmp_path):
    name = native._digest()
    assert native._digest() == name
    monkeypatch.setattr(native, "FLAGS", (*native.FLAGS, "-DBITA_OTHER"))
    assert native._digest() != name
    monkeypatch.undo()
    edited = tmp_path / native.HEADERS[0].name
    edited.write_bytes(native.HEADERS[0].read_bytes() + b"\n")
    monkeypatch.setattr(native, "HEADERS", (edited, *native.HEADERS[1:]))
    assert native._digest() != name
    monkeypatch.undo()
    monkeypatch.setattr(native, "cpu_info", lambda: {"flags": "fpu sse2"})
    assert native._digest() != name


@needs_native
def test_a_cached_library_loads_without_a_compiler_and_one_of_other_sources_never(monkeypatch, tmp_path):
    built = native._library
    forget_native(monkeypatch)
    folder = tmp_path / "native"
    folder.mkdir(mode=0o700)
    shutil.copy(built._name, folder / f"native-{native._digest()}.so")
    monkeypatch.setattr(native.shutil, "which", lambda name: None)
    monkeypatch.setenv("PATH", "")
    assert native.unavailable(folder) is None
    weight, x = torch.randn(33, 7), torch.randn(3, 7)
    torch.testing.assert_close(native.linear(x, native.pack(weight), None, 33), F.linear(x, weight))

    forget_native(monkeypatch)
    edited = tmp_path / native.SOURCES[0].name
    edited.write_bytes(native.SOURCES[0].read_bytes() + b"\n/* edited */\n")
    monkeypatch.setattr(native, "SOURCES", (edited, *native.SOURCES[1:]))
    assert native.unavailable(folder).endswith("no C compiler found (cc, gcc or clang; or set CC)")


def fake_compiler(folder, body):
    """An executable script standing in for the C compiler (``$CC``): it adds a line to ``calls`` when run."""
    script = folder / "fake-cc"
    script.write_text(f"#!/bin/sh\necho run >> {folder / 'calls'}\n{body}\n")
    script.chmod(0o755)
    return script


def test_a_failed_compile_says_its_error_line_and_is_not_retried(monkeypatch, tmp_path):
    forget_native(monkeypatch)
    compiler = fake_compiler(tmp_path, 'echo "In file included from x.c:1:" >&2\necho "x.c:2: error: boom" >&2\n'
                                       'echo "1 error generated." >&2\nexit 1')
    monkeypatch.setenv("CC", str(compiler))
    folder = tmp_path / "native"
    why = native.unavailable(folder)
    marker = folder / f"native-{native._digest()}.failed"
    assert why == ("the native kernel could not be built: fake-cc failed: x.c:2: error: boom "
                   f"(remembered in {marker}: delete it to retry)")
    assert marker.is_file() and (tmp_path / "calls").read_text().count("run") == 1

    forget_native(monkeypatch)  # a new process
    assert native.unavailable(folder) == why
    assert (tmp_path / "calls").read_text().count("run") == 1  # not run again

    marker.unlink()
    forget_native(monkeypatch)
    assert native.unavailable(folder) == why
    assert (tmp_path / "calls").read_text().count("run") == 2  # retried once the marker is gone


def test_another_compiler_retries_a_remembered_failure(monkeypatch, tmp_path):
    forget_native(monkeypatch)
    monkeypatch.setenv("CC", str(fake_compiler(tmp_path, "exit 1")))
    folder = tmp_path / "native"
    assert native.unavailable(folder).endswith("fake-cc failed: exit status 1 (remembered in "
                                               f"{folder / f'native-{native._digest()}.failed'}: delete it to retry)")
    forget_native(monkeypatch)
    monkeypatch.setenv("CC", str(fake_compiler(tmp_path, "echo warning: a new version >&2\nexit 2")))
    assert native.unavailable(folder).endswith("fake-cc failed: warning: a new version (remembered in "
                                               f"{folder / f'native-{native._digest()}.failed'}: delete it to retry)")
    assert (tmp_path / "calls").read_text().count("run") == 2


def test_a_compile_that_hangs_is_stopped(monkeypatch, tmp_path):
    forget_native(monkeypatch)
    monkeypatch.setenv("CC", str(fake_compiler(tmp_path, "sleep 60")))
    monkeypatch.setattr(native, "COMPILE_TIMEOUT", 0.5)
    folder = tmp_path / "native"
    start = time.monotonic()
    why = native.unavailable(folder)
    assert time.monotonic() - start < 30
    assert why.startswith("the native kernel could not be built: fake-cc was stopped after 0.5 s (remembered in ")
    assert (folder / f"native-{native._digest()}.failed").is_file()
    assert [path.name for path in folder.iterdir()] == [f"native-{native._digest()}.failed"]  # no scratch left


def misuses():
    """Calls of each wrapper that it must refuse, by name (listing them needs no library: a call packs its weight)."""
    bf16, mask = torch.bfloat16, torch.ones(2, 10, dtype=torch.bool)
    x, weight, queries, keys = torch.randn(3, 24), torch.randn(40, 24), torch.randn(2, 4, 64), torch.randn(2, 10, 64)
    heads, table = torch.randn(2, 3, 64), torch.randn(2, 64)

    def packed():
        return native.pack(weight)
    return {
        "pack: one dimension": lambda: native.pack(torch.randn(40)),
        "linear: x in float64": lambda: native.linear(x.double(), packed(), None, 40),
        "linear: packed of another dtype": lambda: native.linear(x.to(bf16), packed(), None, 40),
        "linear: more outputs than packed": lambda: native.linear(x, packed(), None, 80),  # a tile more
        "linear: more inputs than packed": lambda: native.linear(torch.randn(3, 30), packed(), None, 40),
        "linear: packed not flat": lambda: native.linear(x, packed().view(-1, 32), None, 40),
        "linear: bias of another size": lambda: native.linear(x, packed(), torch.randn(39), 40),
        "linear: residual of another shape": lambda: native.linear(x, packed(), None, 40, torch.randn(3, 39)),
        "linear: residual not contiguous": lambda: native.linear(x, packed(), None, 40, torch.randn(40, 3).t()),
        "linear: residual of another dtype": lambda: native.linear(x, packed(), None, 40, torch.randn(3, 40).to(bf16)),
        "rms_norm: last dimension apart": lambda: native.rms_norm(torch.randn(8, 3).t(), torch.randn(8), 1e-5),
        "rms_norm: weight of another size": lambda: native.rms_norm(x, torch.randn(23), 1e-5),
        "rms_norm: weight of another dtype": lambda: native.rms_norm(x, torch.randn(24).to(bf16), 1e-5),
        "rms_norm: integers": lambda: native.rms_norm(torch.ones(3, 24, dtype=torch.int32), torch.randn(24), 1e-5),
        "rotate_: heads not D apart": lambda: native.rotate_(torch.randn(2, 64, 3).transpose(1, 2), table, table),
        "rotate_: a head past 512": lambda: native.rotate_(torch.randn(2, 1, 520), torch.randn(2, 520),
                                                           torch.randn(2, 520)),
        "rotate_: cos of another shape": lambda: native.rotate_(heads, torch.randn(1, 64), table),
        "rotate_: sin of another dtype": lambda: native.rotate_(heads, table, table.to(bf16)),
        "silu_mul: odd width": lambda: native.silu_mul(torch.randn(2, 7)),
        "silu_mul: not contiguous": lambda: native.silu_mul(torch.randn(8, 2).t()),
        "silu_mul: three dimensions": lambda: native.silu_mul(torch.randn(2, 2, 8)),
        "attend: query of two dimensions": lambda: native.attend(queries[0], keys, keys, mask),
        "attend: query in float64": lambda: native.attend(queries.double(), keys.double(), keys.double(), mask),
        "attend: keys of another head dimension": lambda: native.attend(queries, torch.randn(2, 10, 32),
                                                                        torch.randn(2, 10, 32), mask),
        "attend: values of another shape": lambda: native.attend(queries, keys, torch.randn(2, 9, 64), mask),
        "attend: keys not contiguous": lambda: native.attend(queries, torch.randn(10, 2, 64).transpose(0, 1), keys,
                                                             mask),
        "attend: keys of another dtype": lambda: native.attend(queries, keys.to(bf16), keys.to(bf16), mask),
        "attend: heads not a multiple of kv_heads": lambda: native.attend(torch.randn(2, 3, 64), keys, keys, mask),
        "attend: a head dimension off the lanes": lambda: native.attend(torch.randn(2, 4, 65), torch.randn(2, 10, 65),
                                                                        torch.randn(2, 10, 65), mask),
        "attend: a mask of bytes": lambda: native.attend(queries, keys, keys, mask.to(torch.uint8)),
        "attend: a mask past the capacity": lambda: native.attend(queries, keys, keys, torch.ones(2, 11).bool()),
        "attend: a mask of other rows": lambda: native.attend(queries, keys, keys, mask[:1]),
    }


@needs_native
@pytest.mark.parametrize("misuse", list(misuses()))
def test_each_wrapper_refuses_a_tensor_it_cannot_take(misuse):
    """A clear ValueError naming the function, where the C code would read or write out of bounds."""
    with pytest.raises(ValueError, match=r"^native\.(pack|linear|rms_norm|rotate_|silu_mul|attend)"):
        misuses()[misuse]()


@needs_native
def test_pack_leaves_a_weight_it_cannot_pack_to_the_other_paths():
    assert native.pack(torch.randn(4, 4, dtype=torch.float64)) is None


def tree_allowed(rows: int, context: int) -> torch.Tensor:
    """allowed [rows, context + rows] of a tree pass after ``context`` cached slots: every row sees the context, its
    ancestors and itself (row i's parent: i - 1 for even i, i - 2 for odd i, so odd rows are siblings of the row
    before them), never a sibling."""
    allowed = torch.zeros(rows, context + rows, dtype=torch.bool)
    allowed[:, :context] = True
    for row in range(rows):
        node = row
        while True:
            allowed[row, context + node] = True
            if node == 0:
                break
            node = node - 1 if node % 2 == 0 else max(node - 2, 0)
    return allowed


def check_attention(dtype, kv_heads, groups, dim, context, seed=0, rows=16):
    """A tree pass of ``rows`` rows of native.attend against float64 softmax attention (within rounding), and each row
    against the same row alone in a one-row pass whose logical keys sit elsewhere in a cache of another capacity:
    bitwise."""
    generator = torch.Generator().manual_seed(seed)
    allowed = tree_allowed(rows, context)
    width = allowed.shape[1]
    keys, values = (torch.randn(kv_heads, width + 5, dim, generator=generator).to(dtype) for _ in range(2))
    query = torch.randn(rows, kv_heads * groups, dim, generator=generator).to(dtype)
    out = native.attend(query, keys, values, allowed)
    wide_keys, wide_values = (cache[:, :width].double().repeat_interleave(groups, 0) for cache in (keys, values))
    scores = torch.einsum("rhd,hkd->rhk", query.double(), wide_keys) * dim ** -0.5
    expected = torch.einsum("rhk,hkd->rhd", scores.masked_fill(~allowed[:, None], float("-inf")).softmax(-1),
                            wide_values)
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(out.double(), expected, atol=tolerance, rtol=tolerance)
    for row in range(rows):
        slots = allowed[row].nonzero()[:, 0]
        capacity, at = len(slots) + 40, 7  # its keys from slot 7 on, other keys before and after
        alone_keys, alone_values = (torch.randn(kv_heads, capacity, dim, generator=generator).to(dtype) for _ in range(2))
        alone_keys[:, at:at + len(slots)], alone_values[:, at:at + len(slots)] = keys[:, slots], values[:, slots]
        sees = torch.zeros(1, at + len(slots) + 3, dtype=torch.bool)
        sees[0, at:at + len(slots)] = True
        alone = native.attend(query[row:row + 1], alone_keys, alone_values, sees)[0]
        assert torch.equal(alone.view(torch.int16 if dtype == torch.bfloat16 else torch.int32),
                           out[row].view(torch.int16 if dtype == torch.bfloat16 else torch.int32)), (context, row)


@needs_native
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(("kv_heads", "groups", "dim"), [(3, 3, 64), (2, 5, 128), (1, 8, 32), (2, 2, 16)])
def test_native_attention_is_attention_and_a_tree_row_is_bitwise_its_ar_row(dtype, kv_heads, groups, dim):
    """Rows seeing their ancestors only (different visible subsets), 0 to 1000 cached slots (tiles of keys cut
    anywhere), 1 and 2 threads (the split of the work never changes a row)."""
    if dim % native._limits.lanes:
        pytest.skip(f"a head of {dim} is off this build's {native._limits.lanes} lanes")
    threads = torch.get_num_threads()
    try:
        for count in (1, 2):
            torch.set_num_threads(count)
            for context in (0, 1, 7, 47, 300, 1000):
                check_attention(dtype, kv_heads, groups, dim, context)
    finally:
        torch.set_num_threads(threads)


@needs_native
def test_bf16_attention_runs_on_the_amx_tiles_where_they_run():
    """Where the AMX kernels run, bf16 attention with a head dimension that is a multiple of 32 runs on the tiles
    (native_amx_attention.c): 40 tree rows (several tiles of query rows; with 31 to 95 cached, tree slots in more than
    one chunk of 32 keys and rows whose logical keys end inside a chunk), each row bitwise its AR row."""
    if native.amx_unavailable() is not None:
        pytest.skip(native.amx_unavailable())
    assert native.attention_on_tiles(64, torch.bfloat16) and native.attention_on_tiles(128, torch.bfloat16)
    assert not native.attention_on_tiles(48, torch.bfloat16) and not native.attention_on_tiles(64, torch.float32)
    for kv_heads, groups, dim in [(3, 3, 64), (1, 1, 32), (2, 8, 128)]:
        for context in (0, 31, 33, 95, 300):
            check_attention(torch.bfloat16, kv_heads, groups, dim, context, rows=40)


@needs_native
@pytest.mark.parametrize("march", ["haswell", "skylake-avx512", "cooperlake"])
def test_native_attention_of_each_isa_build(monkeypatch, tmp_path, march):
    """The AVX2 build, the AVX-512 one without AVX512-BF16 (bf16 keys widened) and the one with AVX512-BF16 but no AMX
    (bf16 scores by vdpbf16ps), where this CPU runs them: the same checks as above (their sums are in another order
    than this machine's native build: each is checked on its own); only the last holds the dot kernel."""
    flags = native.cpu_info().get("flags", "").split()
    if march != "haswell" and "avx512f" not in flags or march == "cooperlake" and "avx512_bf16" not in flags:
        pytest.skip(f"this CPU does not run a {march} build")
    forget_native(monkeypatch, march)
    assert native.unavailable(tmp_path / "native") is None
    assert native.describe().startswith("avx2" if march == "haswell" else "avx512 (")
    assert not native.attention_on_tiles(64, torch.bfloat16)  # no AMX code in these builds
    assert (native.dot_unavailable() is None) == (march == "cooperlake"), native.dot_unavailable()  # vdpbf16ps
    for dtype in DTYPES:
        for shape in [(3, 3, 64), (2, 3, 24), (1, 4, 16)]:
            if not shape[2] % native._limits.lanes:
                for context in (1, 300, 1000):
                    check_attention(dtype, *shape, context)
