"""Same bits everywhere: every builtin x model x path x backend x data class, saved on one
machine and compared on another, or compared across backends and paths in one run.

    python benchmarks/crosscheck.py --save ref.npz --jobs 2           # one machine (e.g. the CPU)
    python benchmarks/crosscheck.py --compare ref.npz --jobs 12       # another (e.g. a GPU): same bits?
    python benchmarks/crosscheck.py --self                            # this machine: Pallas = XLA, registers = matrix
    python benchmarks/crosscheck.py --diff ref.npz other.npz          # two saved runs, nothing computed

The grid (`grid`):

* ``gemm``: every builtin (every row of the table; ``--targets`` adds the CDNA3 rows whose fp8/bf8
  decode differently for ``target='gfx950'``, and the rows whose default model on another target
  is a model text, e.g. gfx90a's non-1k bf16 ``CDNA2(group=2)``) x every model preset that applies
  to it (what `jwmma.models.resolve` accepts for the builtin, and the row's own model text: the rule
  of ``jwmma gemm --model`` and the builtins' ``model=``;
  RDNA4 iu8/iu4 builtins with clamp=False and clamp=True) x ``jwmma.gemm(path='matrix')`` and
  ``path='registers'`` with ``backend='xla'``, plus ``path='matrix'`` with ``backend='pallas'``
  wherever `jwmma.backends.pallas.kernel_for` names a kernel for the model (the register path
  runs XLA whatever the backend: not repeated). One call holds every data
  class along a leading axis, then a batch dim of 2; M, N are two tiles cut short, K three
  steps and an odd part of a fourth (`crosscheck_data.gemm_shape`); sparse builtins take a
  dense-shaped A through ``prune=True``.
* ``waves``: the builtin function called directly on 4 waves per class, registers packed from
  the class data (on the host CPU, so both machines feed the same words), the last index set,
  random bits in the other sets, duplicate positions in the specials class; on ``backend='xla'``,
  and on ``'pallas'`` (and ``'mosaic'``) wherever `jwmma.backends.pallas.call_kernel` runs the
  waves on a kernel.
* ``prune``: `jwmma.prune_2_4` with rule='largest' and 'hipsparselt' (where hipSPARSELt prunes
  the dtype) on every A dtype, eager and under `jax.jit`, on ties / specials / wide / normal.
* ``repro``: issue 20's two repro operand sets (`crosscheck_data.issue20_repro`).

Data classes: `crosscheck_data` (normal; wide exponents with products at the format limits and
subnormal f32 results; pruning ties; NaN/Inf/-0; saturating integers). Operands are built with
numpy from fixed seeds, and a digest of each operand set is stored with the results: a
comparison says so when two runs did not see the same inputs.

Comparison: bits as unsigned integers. Across machines (``--compare``, ``--diff``) a NaN
equals any NaN unless the model defines NaN payloads (NUMERICS.md 2 and 8.3: `gfx12_dot4`,
rocjitsu's `fma_chain` propagating payloads, the NVIDIA presets' fixed NaN); payload-only
differences are still counted and shown. Within one run (``--self``) every result must equal
its anchor bit for bit, payloads included (the same machine, the same arithmetic): the gemm
anchor is path='matrix' on XLA, the prune anchor the eager call, a direct call's on a kernel the
same call on XLA; direct calls on XLA have none (they are checked against a reference run). ``--compare`` takes the reference's result of
the same key, or its anchor where the reference lacks the key (e.g. a reference saved with
``--backends xla``, or cut to its anchors by ``--strip``). A result that raised counts as an
error with 0 identical outputs.

On a GPU, ``--jobs N`` runs the grid in N processes (compiling is what takes the time); their
``XLA_PYTHON_CLIENT_PREALLOCATE`` defaults to false so that they share the device.
``--save`` writes what is done every ``--save-every`` seconds and at the end; ``--resume``
skips the keys a saved file already holds; ``--time-limit`` stops starting items (exit code 3
for a partial run: run the same command again with ``--resume``). ``--keys`` / ``--skip-keys``
take a file naming keys (any whitespace-separated word that is a key: a list, a ``--quiet``
report, a progress log) to run only those, or all but those: the keys a report flagged, or
those a progress log shows done when the saved file was lost.
"""
from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import json
import os
import sys
import time

import numpy as np

import crosscheck_data as data

PARTS = ("gemm", "waves", "prune", "repro")
PATHS = ("matrix", "registers")
BACKENDS = ("xla", "pallas")
PRUNE_RULES = ("largest", "hipsparselt")

#: known defects the grid shows while they are open: (description -> key predicate); none now
#: (dense WMMA GEMMs on backend='pallas' raised until the Pallas driver learnt dense A)
KNOWN: dict = {}


# ------------------------------------------------------------------------------ keys
@dataclasses.dataclass(frozen=True)
class Key:
    """One result: part, builtin ('name' or 'name@target'; prune: the dtype; repro: the set),
    model (prune: the rule), clamp, path ('matrix', 'registers', 'waves'; prune: 'eager' or
    'jit'; repro: also 'prune'), backend."""

    part: str
    builtin: str
    model: str
    path: str
    backend: str
    clamp: bool = False

    def __str__(self):
        return "|".join((self.part, self.builtin, self.model + ("+clamp" if self.clamp else ""), self.path,
                         self.backend))

    @classmethod
    def parse(cls, text: str) -> "Key":
        part, builtin, model, path, backend = text.split("|")
        clamp = model.endswith("+clamp")
        return cls(part, builtin, model[: -len("+clamp")] if clamp else model, path, backend, clamp)

    @property
    def anchor(self) -> "Key | None":
        """The result this one must equal in the same run (None: it is an anchor, or has none)."""
        if self.part in ("gemm", "repro") and self.path != "prune" and (self.path, self.backend) != ("matrix", "xla"):
            return dataclasses.replace(self, path="matrix", backend="xla")
        if self.part == "prune" and self.path == "jit":
            return dataclasses.replace(self, path="eager")
        if self.part == "waves" and self.backend != "xla":  # calls on the kernels: the XLA call's bits
            return dataclasses.replace(self, backend="xla")
        return None

    @property
    def name(self) -> str:
        return self.builtin.split("@")[0]

    @property
    def target(self) -> str | None:
        return self.builtin.split("@")[1] if "@" in self.builtin else None


def _specs():
    """Every (label, spec): the table's rows, plus the CDNA3 rows whose fp8/bf8 decode
    differently for their second target."""
    import jwmma
    from jwmma.isa.table import lookup

    for name, spec in jwmma.BUILTINS.items():
        if spec.scaled:  # one label per format pair of `data.SCALED_PAIRS` ('name@f14': fmt_a 1, fmt_b 4)
            for fa, fb in data.SCALED_PAIRS:
                yield f"{name}@f{fa}{fb}", lookup(name, None, (fa, fb))
            continue
        yield name, spec
        for t in spec.targets[1:]:
            other = lookup(name, t)
            if (other.a_format, other.b_format) != (spec.a_format, spec.b_format) or \
                    _own_model(other) not in (None, _own_model(spec)):
                yield f"{name}@{t}", other


def _same_formats_as_row(label: str, spec) -> bool:
    """Whether a target variant decodes its operands as the row on its default target does."""
    import jwmma

    row = jwmma.BUILTINS[label.partition("@")[0]]
    return "@" in label and (spec.a_format, spec.b_format) == (row.a_format, row.b_format)


def _own_model(spec):
    """A row's default model where it is a model text rather than a preset (gfx90a's non-1k
    bf16 rows: 'CDNA2(group=2)'), which the presets of the grid do not cover; else None."""
    from jwmma import models

    return None if spec.default_model in models.PRESETS else spec.default_model


@functools.lru_cache(maxsize=None)
def spec_of(label: str):
    from jwmma.isa.table import lookup

    name, _, target = label.partition("@")
    if target.startswith("f") and len(target) == 3 and target[1:].isdigit():  # a scaled row's formats
        return lookup(name, None, (int(target[1]), int(target[2])))
    return lookup(name, target or None)


def applicable_models(spec, clamp: bool = False) -> list[str]:
    """The presets `jwmma.models.resolve` accepts for ``spec`` (what a ``model=`` name may be)."""
    from jwmma import models
    from jwmma.engine.step import context

    out = []
    for name in models.PRESETS:
        try:
            models.resolve(name, context(spec, clamp), spec.default_model)
        except ValueError:
            continue
        out.append(name)
    return out


def _on_gpu(spec, model: str, clamp: bool, lowering: str) -> tuple:
    """(resolved model, resolved options) of ``backend='pallas'`` on a GPU with ``lowering``."""
    from jwmma import PallasOptions, models
    from jwmma.engine.options import Options, resolve
    from jwmma.engine.step import context

    m = models.resolve(model, context(spec, clamp), spec.default_model)
    return m, resolve(Options(backend="pallas", platform="gpu", pallas=PallasOptions(lowering=lowering)))


def has_kernel(spec, model: str, clamp: bool = False, lowering: str = "triton") -> bool:
    """Whether backend='pallas' runs a Pallas kernel for the GEMM (else it raises: not in the
    grid), lowered by ``lowering`` ('triton' or 'mosaic')."""
    from jwmma.backends import pallas

    try:
        return pallas.kernel_for(spec, *_on_gpu(spec, model, clamp, lowering))
    except ValueError:
        return False


def has_call_kernel(spec, model: str, clamp: bool = False, lowering: str = "triton") -> bool:
    """Whether backend='pallas' runs a direct call's waves on a Pallas kernel
    (`jwmma.backends.pallas.call_kernel`; else the call runs XLA: not repeated in the grid)."""
    from jwmma.backends import pallas

    return pallas.call_kernel(spec, *_on_gpu(spec, model, clamp, lowering)) is not None


def grid(parts=PARTS, paths=PATHS, backends=BACKENDS, only=None, models=None, targets=False) -> list[Key]:
    """Every key of the grid (module doc), filtered: ``only`` / ``models`` are lists of
    substrings of builtin labels / exact model names."""
    keys = []
    for label, spec in _specs():
        if (only and not any(o in label for o in only)) or (not targets and "@" in label and not spec.scaled):
            continue
        for clamp in ((False, True) if spec.signed_choice else (False,)):
            own = [_own_model(spec)] if _own_model(spec) else []
            presets = [] if own and _same_formats_as_row(label, spec) else applicable_models(spec, clamp)
            for model in presets + own:  # a variant there only for its model text: that model alone
                if models and model not in models:
                    continue
                if "gemm" in parts:
                    for path in paths:
                        if "xla" in backends:
                            keys.append(Key("gemm", label, model, path, "xla", clamp))
                    for be, lowering in (("pallas", "triton"), ("mosaic", "mosaic")):
                        if be in backends and "matrix" in paths and has_kernel(spec, model, clamp, lowering):
                            keys.append(Key("gemm", label, model, "matrix", be, clamp))
                if "waves" in parts:
                    if "xla" in backends:
                        keys.append(Key("waves", label, model, "waves", "xla", clamp))
                    for be, lowering in (("pallas", "triton"), ("mosaic", "mosaic")):
                        if be in backends and has_call_kernel(spec, model, clamp, lowering):
                            keys.append(Key("waves", label, model, "waves", be, clamp))
    if "prune" in parts and not only and not models:
        for dt in data.PRUNE_DTYPES:
            for rule in PRUNE_RULES:
                if rule == "largest" or dt in data.HIPSPARSELT:
                    keys += [Key("prune", dt, rule, mode, "-") for mode in ("eager", "jit")]
    if "repro" in parts and not only and not models:
        for name, (builtin, model, prune, *_ops) in data.issue20_repro().items():
            keys += [Key("repro", name, model, p, "xla") for p in paths]
            if "pallas" in backends and "matrix" in paths:
                keys.append(Key("repro", name, model, "matrix", "pallas"))
            if prune:
                keys.append(Key("repro", name, "largest", "prune", "-"))
    return keys


# ------------------------------------------------------------------------------ running
def _bits(x) -> np.ndarray:
    x = np.asarray(x)
    return x.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize])


def _digest(*arrays) -> str:
    h = hashlib.sha1()
    for x in arrays:
        if x is not None:
            x = np.ascontiguousarray(x)
            h.update(str((x.dtype.str, x.shape)).encode())
            h.update(x.view(np.uint8).tobytes())
    return h.hexdigest()[:16]


def _options(backend: str):
    import jax
    import jwmma

    if backend in ("pallas", "mosaic"):  # 'mosaic': the kernels lowered by Mosaic GPU
        on_cpu = jax.default_backend() == "cpu"
        lowering = "mosaic" if backend == "mosaic" else None
        return jwmma.Options(backend="pallas", pallas=jwmma.PallasOptions(interpret=True if on_cpu else None,
                                                                          lowering=lowering))
    return jwmma.Options(backend="xla")


@functools.lru_cache(maxsize=4)
def _gemm_data(label: str):
    spec = spec_of(label)
    a, b, c, names = data.gemm_operands(spec)
    sa, sb = data.gemm_scales(spec, names) if spec.scaled else (None, None)
    return a, b, c, names, sa, sb, _digest(a, b, c, sa, sb)


@functools.lru_cache(maxsize=4)
def _wave_data(label: str):
    """Registers of the direct calls, packed on the host CPU (the same words on every machine)."""
    import jax
    import jwmma

    spec = spec_of(label)
    a, pos, b, c, names = data.wave_operands(spec)
    kw = {"target": spec.target} if len(spec.targets) > 1 else {}
    last = spec.n_sets - 1 if not spec.dense else 0
    with jax.default_device(jax.devices("cpu")[0]):
        ra = np.asarray(jwmma.pack_a(spec.name, a, **kw))
        rb = np.asarray(jwmma.pack_b(spec.name, b, **kw))
        rc = np.asarray(jwmma.pack_c(spec.name, c, **kw))
        idx = None
        if not spec.dense:
            idx = np.asarray(jwmma.pack_index(spec.name, pos, index_set=last)).view(np.uint32)
            if spec.n_sets > 1:  # the other sets hold random bits: the call must not read them
                width = 32 // spec.n_sets
                mine = np.uint32(((1 << width) - 1) << spec.index_sets[last])
                rng = np.random.default_rng(data.seed_of("idx", label))
                noise = rng.integers(0, 1 << 32, idx.shape, dtype=np.uint64).astype(np.uint32)
                idx = (idx & mine) | (noise & ~mine)
            idx = idx.view(np.int32)
        if spec.scaled:  # random scale words: the call reads byte 1 of A's and byte 2 of B's
            rng = np.random.default_rng(data.seed_of("scale-words", label))
            words = rng.integers(110, 145, (len(names), data.WAVES, spec.lanes, 4), dtype=np.uint64)
            words[..., 0, :][..., 1] = 255  # a NaN scale in lane 0 of some waves' A
            words = (words.astype(np.uint32) << (8 * np.arange(4, dtype=np.uint32))).sum(-1, dtype=np.uint32)
            idx = words.view(np.int32)
    return ra, rb, rc, idx, names, _digest(ra, rb, rc, idx)


def _payloads(spec, model: str) -> bool:
    """Whether the model defines its NaN results' payloads (compare them across machines)."""
    from jwmma import models
    from jwmma.engine.step import context

    if spec.integer:
        return True
    m = models.resolve(model, context(spec), spec.default_model)
    if isinstance(m, models.Gfx12Dot4) or isinstance(m, (models.NvidiaTensorCore, models.FusedDotAdd)):
        return True
    return isinstance(m, models.FMAChain) and m.nan == "propagate"


def run_key(key: Key):
    """(bits or None, info) of one key; an exception is caught and reported in info['error']."""
    import jax

    t0, c0 = time.perf_counter(), _cpu_seconds()
    info = {}
    try:
        bits, info = _run(key)
        bits = np.ascontiguousarray(bits)
    except Exception as e:  # noqa: BLE001 (reported per key, the run goes on)
        bits, info["error"] = None, f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
    info["seconds"] = round(time.perf_counter() - t0, 3)
    info["cpu_seconds"] = round(_cpu_seconds() - c0, 3)  # all threads: the cost on a busy machine
    _RUN_SINCE_CLEAR[0] += 1
    if _RUN_SINCE_CLEAR[0] >= CLEAR_EVERY:  # bounded memory over a long grid; the keys between
        jax.clear_caches()  # clears share compiled programs (the packing, a builtin's other keys)
        _RUN_SINCE_CLEAR[0] = 0
    return bits, info


#: keys a process runs between two `jax.clear_caches` (1: clear after each key)
CLEAR_EVERY = 16
_RUN_SINCE_CLEAR = [0]


def _cpu_seconds() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _run(key: Key):
    import jax
    import jwmma
    from jwmma.isa.conventions import hip_args

    if key.part == "prune":
        x, names = data.prune_inputs(key.builtin)
        fn = functools.partial(jwmma.prune_2_4, rule=key.model)
        out = (jax.jit(fn) if key.path == "jit" else fn)(x)
        return _bits(out), {"classes": list(names), "kind": "bits", "digest": _digest(x)}
    if key.part == "repro":
        builtin, model, prune, a, b, c = data.issue20_repro()[key.builtin]
        info = {"classes": ["repro"], "digest": _digest(a, b, c)}
        if key.path == "prune":
            return _bits(jwmma.prune_2_4(a))[None], dict(info, kind="bits")
        spec = spec_of(builtin)
        d = jwmma.gemm(a, b, c, builtin=builtin, model=model, prune=prune, path=key.path,
                       options=_options(key.backend))
        return _bits(d)[None], dict(info, kind=spec.c_type, payloads=_payloads(spec, model))
    spec = spec_of(key.builtin)
    info = {"kind": spec.c_type, "payloads": _payloads(spec, key.model)}
    opts = _options(key.backend)
    if key.part == "gemm":
        a, b, c, names, sa, sb, digest = _gemm_data(key.builtin)
        kw = dict(target=spec.target) if len(spec.targets) > 1 else {}
        if spec.signed_choice:
            kw["clamp"] = key.clamp
        if spec.scaled:  # the formats follow the codes' dtypes (uint8 codes: JAX 0.10 has no float6 arrays)
            kw.update(scale_a=sa, scale_b=sb, fmt_a=spec.fmt_codes[0], fmt_b=spec.fmt_codes[1])
            a, b = a.view(np.uint8), b.view(np.uint8)
        d = jwmma.gemm(a, b, c, builtin=spec.name, model=key.model, path=key.path, prune=not spec.dense,
                       options=opts, **kw)
        return _bits(d), dict(info, classes=list(names), digest=digest)
    ra, rb, rc, idx, names, digest = _wave_data(key.builtin)
    last = spec.n_sets - 1 if not spec.dense else 0
    kw = {"model": key.model, "options": opts}
    if spec.convention.name_of("target"):  # the chip picks the decoding or the arithmetic (RDNA3's: the same)
        kw["target"] = spec.target
    if spec.index.selector == "index_key":
        kw["index_key"] = last
    fn = getattr(jwmma, spec.name)
    if spec.scaled:  # fmt codes, and the scale words (one array, bytes 1 and 2 read)
        args = hip_args(spec.convention, ra, rb, rc, fmt_a=spec.fmt_codes[0], fmt_b=spec.fmt_codes[1], opsel_a=1,
                        scale_a=idx, opsel_b=2, scale_b=idx)
    else:
        args = hip_args(spec.convention, ra, rb, rc, idx, a_signed=True, b_signed=False, clamp=key.clamp, abid=last)
    d = fn(*args, **kw)
    return _bits(d), dict(info, classes=list(names), digest=digest)


# ------------------------------------------------------------------------------ comparing
_NAN = {"f32": (0x7F800000, 0x007FFFFF), "f16": (0x7C00, 0x03FF), "bf16": (0x7F80, 0x007F),
        "f64": (0x7FF0000000000000, 0x000FFFFFFFFFFFFF)}


def _nan(bits, kind):
    e, m = _NAN[kind]
    return ((bits & e) == e) & ((bits & m) != 0)


def compare(got, ref, kind: str, payloads: bool):
    """(per-output equality, payload-only differences) of two bit arrays: NaN by NaN-ness for
    float results of a model without payloads, unless ``payloads``."""
    if got is None or ref is None or got.shape != ref.shape or got.dtype != ref.dtype:
        n = (ref if ref is not None else got).shape
        return np.zeros(n, bool), 0
    if kind == "f64" and got.dtype == np.uint32:  # f64 registers: two uint32 words a double, low word first
        got, ref = (np.ascontiguousarray(x).view(np.uint64) for x in (got, ref))
    eq = got == ref
    if kind in _NAN:
        both = _nan(got, kind) & _nan(ref, kind)
        extra = both & ~eq
        if not payloads:
            eq = eq | both
        return eq, int(extra.sum())
    return eq, 0


@dataclasses.dataclass
class Row:
    key: Key
    against: str  # what it was compared with
    counts: list  # (class, identical, total)
    payload_only: int = 0
    error: str | None = None
    note: str = ""

    @property
    def ok(self):
        return self.error is None and all(s == t for _, s, t in self.counts)


def _class_counts(eq, classes):
    if eq.ndim == 0 or eq.shape[0] != len(classes):
        return [("all", int(eq.sum()), int(eq.size))]
    return [(c, int(eq[i].sum()), int(eq[i].size)) for i, c in enumerate(classes)]


def compare_runs(results, infos, ref_results, ref_infos, mode: str) -> list[Row]:
    """Rows of ``results`` against ``ref_results``: mode 'self' (anchors of the same run,
    bit for bit) or 'ref' (same key of the reference, else its anchor; NaN rule)."""
    rows = []
    for text in sorted(infos):
        key, info = Key.parse(text), infos[text]
        if mode == "self":
            if key.anchor is None:
                continue
            other, against = str(key.anchor), "this run's " + _short(key.anchor)
        else:
            other, against = text, "reference"
            if ref_results.get(text) is None and key.anchor is not None:
                other, against = str(key.anchor), "reference " + _short(key.anchor)
        ref, rinfo = ref_results.get(other), ref_infos.get(other, {})
        classes = info.get("classes") or rinfo.get("classes") or ["all"]
        if ref is None:
            why = rinfo.get("error") or MISSING
            rows.append(Row(key, against, [], error=f"no reference result ({why})"))
            continue
        kind = info.get("kind") or rinfo.get("kind")
        payloads = True if mode == "self" else bool(info.get("payloads", rinfo.get("payloads", True)))
        eq, extra = compare(results.get(text), ref, kind, payloads)
        note = ""
        if info.get("digest") and rinfo.get("digest") and info["digest"] != rinfo["digest"]:
            note = "INPUTS DIFFER (digest): not comparable"
        rows.append(Row(key, against, _class_counts(eq, classes), extra, info.get("error"), note))
    return rows


#: why a compared key has no reference result when the reference run never reached it
MISSING = "not in the reference"


def _short(key: Key) -> str:
    return f"{key.path}/{key.backend}"


def known_defect(key: Key) -> str | None:
    for why, match in KNOWN.items():
        if match(key):
            return why
    return None


def report(rows: list[Row], out=print, quiet=False) -> tuple[int, int, int]:
    """Print one line per row (per-class counts) and the summary; returns (identical, total,
    bad rows)."""
    same = total = bad = 0
    w = max([40] + [len(str(r.key)) for r in rows])
    for r in rows:
        s, t = sum(c[1] for c in r.counts), sum(c[2] for c in r.counts)
        same, total = same + s, total + t
        bad += not r.ok
        if quiet and r.ok and not r.payload_only:
            continue
        cells = "  ".join(f"{c} {i}/{n}" for c, i, n in r.counts)
        line = f"{str(r.key):{w}s}  {cells}"
        if r.payload_only:
            line += f"  (NaN payloads differ at {r.payload_only})"
        if r.error:
            kd = known_defect(r.key)
            line += f"  ERROR {r.error}" + (f"  [known: {kd}]" if kd else "")
        if r.note:
            line += f"  {r.note}"
        if not r.ok:
            line += f"  <- vs {r.against}"
        out(line)
    # a key the reference never ran (a time limit) is not a failure of this run: counted apart
    missing = sum(r.error == f"no reference result ({MISSING})" for r in rows)
    out(f"{same}/{total} identical ({len(rows) - bad} of {len(rows)} results fully identical, "
        f"{sum(r.error is not None for r in rows) - missing} errors, {missing} not in the reference)")
    return same, total, bad


# ------------------------------------------------------------------------------ files
def load(path):
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["__meta__"]))
        results = {k: z[k] for k in z.files if k != "__meta__"}
    infos = meta["items"]
    return {k: results.get(k) for k in infos}, infos, meta.get("env", {})


def save(path, results, infos, env):
    tmp = f"{path}.tmp.npz"
    arrays = {k: v for k, v in results.items() if v is not None}
    with open(tmp, "wb") as f:
        np.savez_compressed(f, __meta__=np.array(json.dumps({"env": env, "items": infos})), **arrays)
    os.replace(tmp, path)


def environment() -> dict:
    import jax
    import jwmma

    d = jax.devices()[0]
    return {"jax": jax.__version__, "jaxlib": getattr(jax.lib, "__version__", ""), "jwmma": jwmma.__version__,
            "backend": jax.default_backend(), "device": getattr(d, "device_kind", str(d)),
            "numpy": np.__version__}


# ------------------------------------------------------------------------------ the run
def _work(text):
    bits, info = run_key(Key.parse(text))
    return text, bits, info


def _cost(key: Key) -> int:
    """Rough order for the parallel queue: the longest compiles first."""
    return -(3 * (key.backend in ("pallas", "mosaic")) + 2 * (key.model == "exact") + (key.path == "registers"))


def execute(keys, jobs=1, time_limit=None, on_result=None, log=print):
    """Run ``keys`` (in ``jobs`` processes); ``on_result(text, bits, info)`` for each. Returns
    (results, infos, environment, finished)."""
    results, infos = {}, {}
    t0 = time.perf_counter()
    texts = [str(k) for k in sorted(keys, key=_cost)] if jobs > 1 else [str(k) for k in keys]
    done = 0

    def take(text, bits, info):
        nonlocal done
        done += 1
        results[text], infos[text] = bits, info
        flag = f"  ERROR {info['error']}" if info.get("error") else ""
        log(f"[{done}/{len(texts)} {time.perf_counter() - t0:7.1f}s] {text} {info['seconds']:.1f}s{flag}")
        if on_result:
            on_result(text, bits, info)

    def over():
        return time_limit is not None and time.perf_counter() - t0 > time_limit

    if jobs <= 1:
        env = environment()
        for text in texts:
            if over():
                return results, infos, env, False
            take(*_work(text))
        return results, infos, env, True
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # the workers share one GPU

    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        env = pool.submit(environment).result()
        pending, queue = set(), list(texts)
        while queue or pending:
            while queue and len(pending) < 2 * jobs and not over():
                pending.add(pool.submit(_work, queue.pop(0)))
            if not pending:
                break
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in finished:
                take(*f.result())
        return results, infos, env, not queue


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--save", metavar="NPZ", help="save this run's results")
    ap.add_argument("--compare", metavar="NPZ", help="compare this run with a saved reference")
    ap.add_argument("--self", action="store_true", help="compare every result with its anchor in this run")
    ap.add_argument("--diff", nargs=2, metavar=("REF", "OTHER"), help="compare two saved runs; nothing runs")
    ap.add_argument("--strip", nargs=2, metavar=("SRC", "DST"),
                    help="write SRC's anchors only (what --compare falls back to) to DST; nothing runs")
    ap.add_argument("--parts", default=",".join(PARTS), help=f"comma list of {', '.join(PARTS)}")
    ap.add_argument("--paths", default=",".join(PATHS), help="gemm paths: matrix, registers")
    ap.add_argument("--backends", default=",".join(BACKENDS),
                    help="xla, pallas (Triton), mosaic (the kernels lowered by Mosaic GPU; not in the default grid)")
    ap.add_argument("--only", default=None, help="comma list of substrings of builtin names")
    ap.add_argument("--models", default=None, help="comma list of model presets")
    ap.add_argument("--targets", action="store_true",
                    help="add the rows as decoded on their other targets (gfx950 fp8/bf8, gfx90a's own model texts)")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes (default 1: this one)")
    ap.add_argument("--resume", action="store_true", help="with --save: skip the keys the file already holds")
    ap.add_argument("--time-limit", type=float, default=None, help="seconds after which no item starts")
    ap.add_argument("--save-every", type=float, default=60.0, help="seconds between saves of --save")
    ap.add_argument("--report", metavar="TXT", help="also write the comparison table here")
    ap.add_argument("--quiet", action="store_true", help="print only results that are not identical")
    ap.add_argument("--list", action="store_true", help="print the grid's keys and their count, run nothing")
    ap.add_argument("--keys", metavar="TXT", help="only the grid's keys named in this file (any whitespace-"
                                                  "separated word that is a key: a list, a report, a log)")
    ap.add_argument("--skip-keys", metavar="TXT", help="not the grid's keys named in this file (as --keys), e.g. "
                                                        "the progress log (stderr) of a run whose saved file was lost")
    args = ap.parse_args(argv)
    if not (args.save or args.compare or args.self or args.diff or args.list or args.strip):
        ap.error("give --save, --compare, --self, --diff, --strip or --list")
    if args.strip:
        results, infos, env = load(args.strip[0])
        keep = [k for k in infos if Key.parse(k).anchor is None]
        save(args.strip[1], {k: results[k] for k in keep}, {k: infos[k] for k in keep}, env)
        print(f"{len(keep)} of {len(infos)} results (the anchors) written to {args.strip[1]}")
        return 0
    lines = []

    def out(line):
        print(line, flush=True)
        lines.append(line)

    if args.diff:
        ref, rinfo, renv = load(args.diff[0])
        got, ginfo, genv = load(args.diff[1])
        out(f"# reference {args.diff[0]}: {renv}\n# compared  {args.diff[1]}: {genv}")
        _, _, bad = report(compare_runs(got, ginfo, ref, rinfo, "ref"), out, args.quiet)
        _write(args.report, lines)
        return 1 if bad else 0

    split = lambda s: [x for x in s.split(",") if x] if s else None  # noqa: E731
    keys = grid(parts=split(args.parts), paths=split(args.paths), backends=split(args.backends),
                only=split(args.only), models=split(args.models), targets=args.targets)
    for path, wanted in ((args.keys, True), (args.skip_keys, False)):
        if path:
            with open(path) as f:
                listed = set(f.read().split())
            keys = [k for k in keys if (str(k) in listed) == wanted]
    if args.list:
        for k in keys:
            print(k)
        print(f"{len(keys)} keys")
        return 0
    results, infos, env0 = {}, {}, {}
    if args.resume and args.save and os.path.exists(args.save):
        results, infos, env0 = load(args.save)
        keep = {k for k, v in infos.items() if not v.get("error")}
        results, infos = {k: results[k] for k in keep}, {k: infos[k] for k in keep}
        print(f"# resuming: {len(keep)} results in {args.save}", flush=True)
    todo = [k for k in keys if str(k) not in infos]
    print(f"# {len(keys)} keys, {len(todo)} to run, {args.jobs} process(es)", flush=True)
    last = [time.perf_counter()]
    env_box = [env0]

    def on_result(text, bits, info):
        results[text], infos[text] = bits, info
        if args.save and time.perf_counter() - last[0] > args.save_every:
            save(args.save, results, infos, env_box[0])
            last[0] = time.perf_counter()

    t0 = time.perf_counter()
    new_r, new_i, env, finished = execute(todo, args.jobs, args.time_limit, on_result,
                                          log=lambda s: print(s, file=sys.stderr, flush=True))
    env_box[0] = env = env or env0
    wall = time.perf_counter() - t0
    out(f"# {env}\n# ran {len(new_i)} keys in {wall:.1f} s with {args.jobs} process(es)"
        f"{'' if finished else ' (time limit: partial, rerun with --resume)'}")
    if args.save:
        save(args.save, results, infos, env)
        out(f"# saved {len(infos)} results to {args.save}")
    bad = 0
    wanted = {str(k) for k in keys}
    mine = {k: v for k, v in infos.items() if k in wanted}
    if args.self:
        out("# each result against its anchor in this run (bit for bit)")
        bad += report(compare_runs(results, mine, results, infos, "self"), out, args.quiet)[2]
    if args.compare:
        ref, rinfo, renv = load(args.compare)
        out(f"# against {args.compare}: {renv}")
        bad += report(compare_runs(results, mine, ref, rinfo, "ref"), out, args.quiet)[2]
    errors = [k for k, v in mine.items() if v.get("error")]
    if errors and not (args.self or args.compare):
        out(f"# {len(errors)} keys raised:")
        for k in errors:
            kd = known_defect(Key.parse(k))
            out(f"  {k}: {mine[k]['error']}" + (f"  [known: {kd}]" if kd else ""))
    _write(args.report, lines)
    if not finished:
        return 3
    return 1 if bad or errors else 0


def _write(path, lines):
    if path:
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
