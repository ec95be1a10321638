"""Bad input gives a clear ValueError / TypeError naming the argument; checked mode and
index_violations flag the index pairs the hardware leaves undefined (BUILTINS.md section 5)."""
import re

import jax
import ml_dtypes
import numpy as np
import pytest

import jwmma
from oracles.reference import NAMES, Ref, pack_index


def regs(name, batch=()):
    ref = Ref(name)
    out = [np.zeros(batch + (ref.wave, ref.vec(w)), ref.reg_dtype(w)) for w in "abc"]
    return out + [np.zeros(batch + (ref.wave,), np.int32)]


def run(name, a, b, c, idx, *extra, **kw):
    f = getattr(jwmma, name)
    if Ref(name).signed_choice:
        return f(True, a, True, b, c, idx, False, **kw)
    return f(a, b, c, idx, *extra, **kw)


F16_C4 = "smfmac_f32_16x16x64_f16"
FP8_C4 = "smfmac_f32_16x16x128_fp8_fp8"
IU8 = "swmmac_i32_16x16x32_iu8_w32"
F16_R4 = "swmmac_f32_16x16x32_f16_w32"


# ------------------------------------------------------------------- shapes and dtypes
@pytest.mark.parametrize("name", NAMES)
def test_wrong_lane_counts_and_vector_lengths(name):
    ref = Ref(name)
    a, b, c, idx = regs(name)
    other = 64 if ref.wave == 32 else 32
    for pos, what in ((0, "a"), (1, "b"), (2, "c")):
        args = [a, b, c, idx]
        x = args[pos]
        args[pos] = np.zeros((other, x.shape[1]), x.dtype)
        with pytest.raises(ValueError, match=rf"\b{what}\b.*shape"):
            run(name, *args)
        args[pos] = np.zeros((ref.wave, x.shape[1] + 1), x.dtype)
        with pytest.raises(ValueError, match=rf"\b{what}\b.*shape"):
            run(name, *args)
    idx_word = "index" if ref.arch == "gfx12" else "idx"
    with pytest.raises(ValueError, match=rf"{idx_word}.*shape"):
        run(name, a, b, c, np.zeros(other, np.int32))
    with pytest.raises(TypeError, match=idx_word):
        run(name, a, b, c, np.zeros(ref.wave, np.float32))


@pytest.mark.parametrize("name", NAMES)
def test_wrong_register_dtypes(name):
    a, b, c, idx = regs(name)
    ref = Ref(name)
    wrong = {np.dtype(np.float32): np.float64, np.dtype(np.int32): np.float32, np.dtype(np.float16): np.float32,
             np.dtype(np.int16): np.int8, np.dtype(ml_dtypes.bfloat16): np.float16}
    for pos, what in ((0, "a"), (1, "b"), (2, "c")):
        args = [a, b, c, idx]
        args[pos] = args[pos].astype(wrong[args[pos].dtype])
        with pytest.raises(TypeError, match=rf"\b{what}\b.*dtype"):
            run(name, *args)
    if ref.c_type == "f32":  # a 16-bit accumulator is not an f32 one
        with pytest.raises(TypeError, match=r"\bc\b"):
            run(name, a, b, c.astype(np.float16), idx)


def test_batch_dims_that_do_not_broadcast():
    a, b, c, idx = regs(FP8_C4)
    with pytest.raises(ValueError, match="batch"):
        run(FP8_C4, np.stack([a, a]), np.stack([b, b, b]), c, idx)


# ------------------------------------------------------------------ static arguments
@pytest.mark.parametrize("name", [F16_C4, FP8_C4, "smfmac_i32_32x32x64_i8"])
def test_cbsz_abid_out_of_range(name):
    a, b, c, idx = regs(name)
    for cbsz in (-1, 8, 100):
        with pytest.raises(ValueError, match="cbsz"):
            run(name, a, b, c, idx, cbsz, 0)
    for abid in (-1, 16):
        with pytest.raises(ValueError, match="abid"):
            run(name, a, b, c, idx, 0, abid)
    for bad in (1.0, "0", None):
        with pytest.raises(TypeError, match="cbsz"):
            run(name, a, b, c, idx, bad, 0)
        with pytest.raises(TypeError, match="abid"):
            run(name, a, b, c, idx, 0, bad)


@pytest.mark.parametrize("name", ["swmmac_i32_16x16x32_iu8_w32", "swmmac_i32_16x16x32_iu4_w32", "swmmac_i32_16x16x64_iu4_w32"])
def test_non_bool_flags(name):
    a, b, c, idx = regs(name)
    f = getattr(jwmma, name)
    for bad in (2, "yes", None, 1.0):
        with pytest.raises(TypeError, match="a_neg"):
            f(bad, a, True, b, c, idx, False)
        with pytest.raises(TypeError, match="b_neg"):
            f(True, a, bad, b, c, idx, False)
        with pytest.raises(TypeError, match="clamp"):
            f(True, a, True, b, c, idx, bad)


def test_index_key_out_of_range():
    a, b, c, idx = regs(F16_R4)
    for bad in (2, -1):
        with pytest.raises(ValueError, match="index_key"):
            jwmma.swmmac_f32_16x16x32_f16_w32(a, b, c, idx, index_key=bad)


# ------------------------------------------------------------------------ names
@pytest.mark.parametrize("fn,args", [
    (jwmma.pack_a, (np.zeros((16, 32), np.float16),)),
    (jwmma.unpack_a, (np.zeros((64, 8), np.float16),)),
    (jwmma.pack_b, (np.zeros((64, 16), np.float16),)),
    (jwmma.unpack_b, (np.zeros((64, 16), np.float16),)),
    (jwmma.pack_c, (np.zeros((16, 16), np.float32),)),
    (jwmma.unpack_c, (np.zeros((64, 4), np.float32),)),
    (jwmma.pack_index, (np.zeros((16, 32), np.int32),)),
    (jwmma.unpack_index, (np.zeros(64, np.int32),)),
    (jwmma.index_violations, (np.zeros(64, np.int32),)),
])
def test_unknown_builtin_names(fn, args):
    with pytest.raises(ValueError, match="nope"):
        fn("nope", *args)
    with pytest.raises((TypeError, ValueError)):
        fn(None, *args)
    # the HIP name with its prefix is accepted
    fn("__builtin_amdgcn_" + F16_C4, *args)


def test_unknown_model_names_list_the_valid_ones():
    a, b, c, idx = regs(F16_C4)
    with pytest.raises(ValueError, match=r"nope.*exact"):
        run(F16_C4, a, b, c, idx, model="nope")
    a, b, c, idx = regs(IU8)
    with pytest.raises(ValueError, match=r"nope.*exact.*staged_clamp"):
        run(IU8, a, b, c, idx, model="nope")
    with pytest.raises(ValueError, match="exact"):  # a float-only model on an integer builtin
        run(IU8, a, b, c, idx, model="fma_chain")


# ---------------------------------------------------------------- fragment inputs
def test_fragment_input_errors():
    with pytest.raises(ValueError, match="a_comp"):
        jwmma.pack_a(F16_C4, np.zeros((16, 16), np.float16))  # Kc is 32, not 16
    with pytest.raises(TypeError, match="a_comp"):
        jwmma.pack_a(F16_C4, np.zeros((16, 32), np.float32))  # float32 is not f16 data
    with pytest.raises(ValueError, match=r"\bb\b"):
        jwmma.pack_b("swmmac_i32_16x16x32_iu4_w32", np.full((32, 16), 16))  # not a 4-bit value
    with pytest.raises(ValueError, match=r"\bb\b"):
        jwmma.pack_b(IU8, np.full((32, 16), -129))
    with pytest.raises(ValueError, match=r"\bc\b"):
        jwmma.pack_c(F16_C4, np.zeros((16, 8), np.float32))
    with pytest.raises(ValueError, match=r"\bc\b"):
        jwmma.unpack_c(F16_C4, np.zeros((32, 4), np.float32))
    for bad in (-1, 4, 7):
        with pytest.raises(ValueError, match="pos"):
            jwmma.pack_index(FP8_C4, np.full((16, 64), bad))
    with pytest.raises(TypeError, match="pos"):
        jwmma.pack_index(FP8_C4, np.zeros((16, 64), np.float32))
    with pytest.raises(ValueError, match="index_set"):
        jwmma.pack_index(FP8_C4, np.zeros((16, 64), np.int32), index_set=1)  # 8-bit: one set
    with pytest.raises(ValueError, match="index_set"):
        jwmma.unpack_index(F16_C4, np.zeros(64, np.int32), index_set=2)


def test_sparsity_input_errors():
    a = np.zeros((3, 8), np.float32)
    a[2, 4:8] = [1, 2, 3, 4]
    with pytest.raises(ValueError, match=r"row 2\b.*group 1\b"):
        jwmma.compress_2_4(a)
    with pytest.raises(ValueError, match="pos"):
        jwmma.decompress_2_4(np.ones((1, 2), np.float32), np.array([[0, 4]]))
    with pytest.raises(ValueError, match="pos"):
        jwmma.decompress_2_4(np.ones((1, 2), np.float32), np.array([[-1, 2]]))


@pytest.mark.parametrize("dtype", [ml_dtypes.float4_e2m1fn, ml_dtypes.float6_e2m3fn, ml_dtypes.float6_e3m2fn])
def test_sparsity_refuses_sub_byte_floats(dtype):
    """4- and 6-bit floats: a TypeError naming the dtype and the float32 way round, where
    prune_2_4 gave an array of another shape (a bit cast back to a 4-bit type adds an axis)
    and the byte-wide bit rules read -0 as non-zero."""
    x = np.zeros((2, 8), np.float32)
    x[:, :2] = 1.0
    narrow = x.astype(dtype)
    name = np.dtype(dtype).name
    for call in (lambda: jwmma.prune_2_4(narrow), lambda: jwmma.compress_2_4(narrow),
                 lambda: jwmma.decompress_2_4(narrow[:, :4], np.tile([0, 1], (2, 2)))):
        with pytest.raises(TypeError, match=f"holds {name} values.*np.float32"):
            call()
    values, pos = jwmma.compress_2_4(jwmma.prune_2_4(x))  # the way round the message names
    assert jwmma.numerics.cast(np.asarray(values), dtype).dtype == dtype and np.asarray(pos).shape == (2, 4)


# -------------------------------------------------------------- checked index mode
def _ref_violations(ref, idx, s, strict):
    """(lanes, pairs) bool: pair t of the lane's field set has p0 >= p1 (CDNA) / p0 == p1."""
    words = np.asarray(idx).view(np.uint32)
    out = np.zeros((ref.wave, ref.na // 2), bool)
    for lane in range(ref.wave):
        for t in range(ref.na // 2):
            p0 = (int(words[lane]) >> (s + 4 * t)) & 3
            p1 = (int(words[lane]) >> (s + 4 * t + 2)) & 3
            out[lane, t] = p0 >= p1 if strict else p0 == p1
    return out


def _valid_pos(ref, rng):
    pairs = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    pick = rng.integers(0, 6, (ref.m, ref.kc // 2))
    return [[pairs[pick[i, c // 2]][c % 2] for c in range(ref.kc)] for i in range(ref.m)]


@pytest.mark.parametrize("name", [F16_C4, FP8_C4, "smfmac_i32_16x16x128_i8", "smfmac_f32_32x32x32_bf16"])
def test_checked_mode_names_lane_and_pair(name, rng):
    ref = Ref(name)
    a, b, c, _ = regs(name)
    for s, (cbsz, abid) in ((0, (0, 0)), (16, (0, 1))) if ref.bits == 16 else ((0, (0, 0)),):
        garbage = np.full(ref.wave, 0x55555555, np.int64)  # (1, 1) pairs in the set not read
        idx = pack_index(ref, _valid_pos(ref, rng), s, garbage=garbage.tolist())
        lane, pair = 37, 2
        words = idx.view(np.uint32).copy()
        for bad_pair in ((2, 1), (3, 3)):
            w = int(words[lane])
            w &= ~(0xF << (s + 4 * pair)) & 0xFFFFFFFF
            w |= (bad_pair[0] | bad_pair[1] << 2) << (s + 4 * pair)
            bad = words.copy()
            bad[lane] = w
            bad = bad.view(np.int32)
            with pytest.raises(ValueError, match=rf"lane {lane}\b.*pair {pair}\b"):
                run(name, a, b, c, bad, cbsz, abid, check=True)
            mask = np.asarray(jwmma.index_violations(name, bad, cbsz, abid))
            np.testing.assert_array_equal(mask, _ref_violations(ref, bad, s, strict=True))
            assert mask.sum() == 1 and mask[lane, pair]
        # the valid index passes (the other set's (1,1) pairs are not read)
        assert not np.asarray(jwmma.index_violations(name, idx, cbsz, abid)).any()
        if ref.integer:  # (cheap to compile) a valid index runs in checked mode
            np.testing.assert_array_equal(np.asarray(run(name, a, b, c, idx, cbsz, abid, check=True)), c)


def test_checked_mode_rdna4_flags_equal_pairs(rng):
    ref = Ref(F16_R4)
    a, b, c, _ = regs(F16_R4)
    idx = pack_index(ref, _valid_pos(ref, rng), 0)
    words = idx.view(np.uint32).copy()
    words[5] = (words[5] & ~np.uint32(0xF0)) | np.uint32(0x50)  # pair 1 = (1, 1)
    bad = words.view(np.int32)
    with pytest.raises(ValueError, match=r"lane 5\b.*pair 1\b"):
        jwmma.swmmac_f32_16x16x32_f16_w32(a, b, c, bad, check=True)
    mask = np.asarray(jwmma.index_violations(F16_R4, bad))
    np.testing.assert_array_equal(mask, _ref_violations(ref, bad, 0, strict=False))


def test_index_violations_batched_and_under_jit(rng):
    ref = Ref(F16_C4)
    idx = rng.integers(0, 2**32, (3, 64), dtype=np.uint64).astype(np.uint32).view(np.int32)
    for cbsz, abid, s in ((0, 0, 0), (0, 1, 16), (1, 1, 0), (4, 3, 16)):
        want = np.stack([_ref_violations(ref, idx[w], s, strict=True) for w in range(3)])
        got = np.asarray(jwmma.index_violations(F16_C4, idx, cbsz, abid))
        assert got.dtype == np.bool_ and got.shape == (3, 64, 4)
        np.testing.assert_array_equal(got, want)
        jitted = jax.jit(lambda i, cbsz=cbsz, abid=abid: jwmma.index_violations(F16_C4, i, cbsz, abid))
        np.testing.assert_array_equal(np.asarray(jitted(idx)), want)


@pytest.mark.parametrize("name,shape,wrong", [
    (F16_C4, (16, 32), np.float32), ("smfmac_f32_16x16x64_bf16", (16, 32), np.float16),
    (FP8_C4, (16, 64), np.float32), ("swmmac_f32_16x16x32_bf8_fp8_w32", (16, 16), ml_dtypes.float8_e4m3fn),
])
def test_dtype_error_suggests_a_conversion_that_exists(name, shape, wrong):
    import re
    with pytest.raises(TypeError, match="a_comp") as err:
        jwmma.pack_a(name, np.zeros(shape, wrong))
    arg, mod, attr = re.search(r"jwmma\.numerics\.cast\((\w+), (\w+)\.(\w+)\)", str(err.value)).groups()
    dtype = getattr({"np": np, "ml_dtypes": ml_dtypes}[mod], attr)
    # the suggested call runs and gives what the builtin wants
    jwmma.pack_a(name, jwmma.numerics.cast(np.zeros(shape, wrong), dtype))


# ------------------------------------------------------------------- unknown keywords
def _public_functions():
    """Every public function of jwmma and jwmma.kernel (found by walking ``__all__``, so a new
    one is covered), and the study's entry points."""
    import inspect

    out = {}
    for mod in (jwmma, jwmma.kernel):
        for name in mod.__all__:
            obj = getattr(mod, name)
            if callable(obj) and not inspect.isclass(obj) and not inspect.ismodule(obj):
                out[f"{mod.__name__}.{name}"] = obj
    out["jwmma.study.run"] = jwmma.study.run
    out["jwmma.study.emulate"] = jwmma.study.emulate
    return out


PUBLIC = _public_functions()


def _parameters(fn):
    import inspect

    sig = inspect.signature(fn)
    return sig, [n for n, p in sig.parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


@pytest.mark.parametrize("qualname", sorted(PUBLIC))
def test_an_unknown_keyword_is_named_before_missing_arguments(qualname):
    fn = PUBLIC[qualname]
    sig, names = _parameters(fn)
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):  # checked(fn, **jit_kwargs)
        pytest.skip("takes any keyword")
    with pytest.raises(TypeError) as err:
        fn(bogus_keyword=1)  # nothing else given: the unknown keyword is what is reported
    text = str(err.value)
    short = qualname.rsplit(".", 1)[1]
    assert f"{short}() got unexpected keyword argument 'bogus_keyword'" in text, text
    assert "missing" not in text, text
    assert f"its parameters: {short}(" in text, text
    for n in names:
        assert re.search(rf"\b{n}\b", text.split("its parameters:")[1]), (n, text)


@pytest.mark.parametrize("name", NAMES)
def test_builtin_hip_names_in_capitals_are_named(name):
    """The issue's example on every builtin: the HIP names spelt as the docs' matrices (A, B,
    C) give a message naming each and the parameter meant, not 'missing a required argument'."""
    f = getattr(jwmma, name)
    sig, names = _parameters(f)
    required = [n for n in names if sig.parameters[n].default is sig.parameters[n].empty]
    values = dict(zip("abc", regs(name)[:3]))
    kwargs = {n.upper() if n in "abc" else n: values.get(n, 0) for n in required}
    with pytest.raises(TypeError) as err:
        f(**kwargs)
    text = str(err.value)
    assert "missing" not in text, text
    for n in "abc":
        assert f"'{n.upper()}' (did you mean '{n}'?)" in text, text
    assert f"its parameters: {name}(" in text and all(re.search(rf"\b{n}\b", text) for n in names), text


def test_builtin_unknown_and_missing_messages():
    a, b, c, idx = regs(F16_C4)
    f = getattr(jwmma, F16_C4)
    with pytest.raises(TypeError, match=r"'modle' \(did you mean 'model'\?\).*its parameters: "
                                        r"smfmac_f32_16x16x64_f16\(a, b, c, idx, cbsz=0, abid=0, \*, model=None"):
        f(a, b, c, idx, modle="exact")
    with pytest.raises(TypeError, match=r"'idx' \(did you mean 'index'\?\)"):
        getattr(jwmma, F16_R4)(*regs(F16_R4)[:3], idx=idx)
    # with no unknown keyword, what is missing is said with the function and its parameters
    with pytest.raises(TypeError, match=r"smfmac_f32_16x16x64_f16\(\): missing a required argument: 'idx'; "
                                        r"its parameters: smfmac_f32_16x16x64_f16\(a, b, c, idx"):
        f(a, b, c)
    with pytest.raises(TypeError, match=r"unexpected keyword arguments 'A' .*'B' .*'C' "):
        f(A=a, B=b, C=c, idx=idx)


def test_gemm_pack_and_dot_name_unknown_keywords():
    a = np.zeros((16, 128), np.float32)
    with pytest.raises(TypeError, match=r"gemm\(\) got unexpected keyword argument 'buitin' \(did you mean 'builtin'\?\)"):
        jwmma.gemm(a, a.T, buitin=FP8_C4)
    with pytest.raises(TypeError, match=r"pack_a\(\) got unexpected keyword arguments 'chek' \(did you mean 'check'\?\), "
                                        r"'tagret' \(did you mean 'target'\?\); its parameters: pack_a\(name, a_comp, \*"):
        jwmma.pack_a(F16_C4, np.zeros((16, 32), np.float16), chek=True, tagret="gfx942")
    with pytest.raises(TypeError, match=r"dot\(\) got unexpected keyword argument 'Model' \(did you mean 'model'\?\)"):
        jwmma.dot(np.ones(4, np.float16), np.ones(4, np.float16), np.float32(0), Model="exact")
    # right keywords still work through the wrappers
    d = jwmma.dot(np.ones(4, np.float16), np.ones(4, np.float16), np.float32(0), model="exact")
    assert np.asarray(d).view(np.uint32) == np.float32(4).view(np.uint32)
