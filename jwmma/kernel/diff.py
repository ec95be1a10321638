"""The readable diff of a kernel's D against a reference D: which tiles, rows, columns, lanes
and accumulator registers differ, by how many ulps, and whether store_c covered D once.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ..keywords import strict_keywords
from .policy import name_of

__all__ = ["compare"]


def _ordered(bits, width):
    """Sign-magnitude float bit patterns (int64; a double's own bits) -> integers ordered like
    the floats (ulp distance; Python ints for doubles, whose distances can pass 2**63)."""
    if width == 64:
        mag = (bits & np.int64(2**63 - 1)).astype(object)
        return np.where(bits < 0, -mag, mag)
    bits = bits.astype(np.int64) & ((1 << width) - 1)
    sign = bits >> (width - 1)
    mag = bits & ((1 << (width - 1)) - 1)
    return np.where(sign == 1, -mag, mag)


def _ranges(vals) -> str:
    vals = sorted(set(int(v) for v in vals))
    out, i = [], 0
    while i < len(vals):
        j = i
        while j + 1 < len(vals) and vals[j + 1] == vals[j] + 1:
            j += 1
        out.append(f"{vals[i]}" if i == j else f"{vals[i]}-{vals[j]}")
        i = j + 1
    return ", ".join(out)


def _fmt(v, bits, width, is_float):
    if not is_float:
        return f"{int(v)}"
    return f"{float(v)!r} (0x{int(bits) & ((1 << width) - 1):0{width // 4}x})"


def _coverage(writes, offsets, geo, max_items) -> list[str]:
    """store_c problems: elements never written or written twice, offsets outside D."""
    out = []
    if writes is not None:
        w = np.asarray(writes)
        never, multi = np.argwhere(w == 0), np.argwhere(w > 1)
        if len(never):
            out.append(f"{len(never)} element(s) of D never written, first (row, col): "
                       + ", ".join(f"({r}, {c})" for r, c in never[:max_items]))
        if len(multi):
            out.append(f"{len(multi)} element(s) of D written more than once, first: "
                       + ", ".join(f"({r}, {c}) x{w[r, c]}" for r, c in multi[:max_items]))
    if offsets is not None and geo is not None:
        o = np.asarray(offsets)
        oob = (o < 0) | (o >= geo.mp * geo.np_)
        if oob.any():
            wv, ln, rg = np.argwhere(oob)[0]
            out.append(f"{int(oob.sum())} offset(s) outside D (0..{geo.mp * geo.np_ - 1}), "
                       f"first: wave {wv} lane {ln} element {rg} -> {o[wv, ln, rg]}")
    return out


def _magnitude(d, ref, db, rb, bad, width, is_float) -> list[str]:
    """The largest differences (ulps and absolute for floats; NaN mismatches counted)."""
    if not is_float:
        diff = np.abs(db - rb)
        i = np.unravel_index(np.argmax(diff), d.shape)
        return [f"  max |difference| {int(diff[i])} at (row {i[0]}, col {i[1]})"]
    out = []
    nan = np.isnan(d.astype(np.float64)) | np.isnan(ref.astype(np.float64))
    both = bad & ~nan
    ulp = np.abs(_ordered(db, width) - _ordered(rb, width))
    absd = np.abs(d.astype(np.float64) - ref.astype(np.float64))
    if both.any():
        i = np.unravel_index(np.argmax(np.where(both, ulp, -1)), d.shape)
        j = np.unravel_index(np.argmax(np.where(both, absd, -1.0)), d.shape)
        out.append(f"  max ulp difference {int(ulp[i])} at (row {i[0]}, col {i[1]}); "
                   f"max |difference| {absd[j]:.6g} at (row {j[0]}, col {j[1]})")
    if (bad & nan).any():
        out.append(f"  {int((bad & nan).sum())} mismatch(es) involve NaN")
    return out


def _tiles(where, geo, max_items) -> tuple[list[str], int, int]:
    """(lines, tiles with mismatches, all tiles): the differing wave tiles of the grid."""
    tr, tc = where[:, 0] // geo.tile_m, where[:, 1] // geo.tile_n
    tiles, counts = np.unique(np.stack([tr, tc], 1), axis=0, return_counts=True)
    n_tiles = -(-geo.m // geo.tile_m) * -(-geo.n // geo.tile_n)
    lines = [f"  wave tiles with mismatches: {len(tiles)} of {n_tiles}"]
    for (r, c), cnt in list(zip(tiles.tolist(), counts.tolist()))[:max_items]:
        blk = (r // geo.waves[0], c // geo.waves[1])
        wv = (r % geo.waves[0], c % geo.waves[1])
        lines.append(f"    block {blk} wave {wv}: rows {r * geo.tile_m}-{(r + 1) * geo.tile_m - 1}, "
                     f"cols {c * geo.tile_n}-{(c + 1) * geo.tile_n - 1}: {cnt}/{geo.tile_m * geo.tile_n} differ")
    if len(tiles) > max_items:
        lines.append(f"    ... and {len(tiles) - max_items} more tile(s)")
    lines.append(f"  rows within a tile that differ: {_ranges(where[:, 0] % geo.tile_m)}; "
                 f"cols within a tile: {_ranges(where[:, 1] % geo.tile_n)}")
    return lines, len(tiles), n_tiles


def _owners(offsets, geo):
    """(mp, np_, 3) array: (wave, lane, register) that stored each element of D (-1: none)."""
    o = np.asarray(offsets)
    owner = np.full((geo.mp * geo.np_, 3), -1, np.int64)
    wv, ln, rg = np.indices(o.shape).reshape(3, -1)
    ok = (o.reshape(-1) >= 0) & (o.reshape(-1) < geo.mp * geo.np_)
    owner[o.reshape(-1)[ok]] = np.stack([wv, ln, rg], 1)[ok]
    return owner.reshape(geo.mp, geo.np_, 3)


def _hint(coverage, n_bad_tiles, n_tiles) -> list[str]:
    if coverage:
        return ["  hint: store_c does not cover D exactly once: fix the store (or the C load it defines) first"]
    if n_tiles is not None and n_bad_tiles < n_tiles:
        return ["  hint: only some wave tiles differ: suspect the block/wave offsets (warp_m, warp_n, sub_m, "
                "sub_n, row strides), or data-dependent index packing"]
    if n_tiles is not None:
        return ["  hint: every wave tile differs: suspect the per-lane layout of load_a, load_b or index (or "
                "the model passed to mma)"]
    return []


def _first(d, ref, db, rb, where, owner, geo, width, is_float, max_items) -> list[str]:
    lines = ["  first mismatches (kernel vs reference):"]
    for r, c in where[:max_items].tolist():
        src = ""
        if owner is not None and owner[r, c, 0] >= 0:
            wid, ln, rg = owner[r, c].tolist()
            blk = [int(x) for x in np.unravel_index(wid, (*geo.blocks, *geo.waves))]
            src = f" [block ({blk[0]}, {blk[1]}) wave ({blk[2]}, {blk[3]}) lane {ln} d[{rg}]]"
        extra = ""
        if is_float and not (np.isnan(float(d[r, c])) or np.isnan(float(ref[r, c]))):
            extra = f", {int(abs(_ordered(db[r, c], width) - _ordered(rb[r, c], width)))} ulp"
        lines.append(f"    (row {r}, col {c}){src}: {_fmt(d[r, c], db[r, c], width, is_float)} vs "
                     f"{_fmt(ref[r, c], rb[r, c], width, is_float)}{extra}")
    return lines


@strict_keywords
def compare(d, ref, *, policy=None, geometry=None, writes=None, offsets=None, max_items=8):
    """The diff of a kernel's D against a reference D.

    Args:
        d, ref: (M, N) arrays of one dtype (compared bit for bit).
        policy: the `Policy` (names the builtin); geometry: the run's
            `jwmma.kernel.runner.Geometry` (tiles, blocks, waves); writes: (Mp, Np) how often
            store_c wrote each element; offsets: (waves, lanes, n_c) the offsets it wrote;
            max_items: how many tiles/mismatches to list.
    Returns:
        The diff as text, or None when D is bit-identical and (if ``writes`` is given) every
        element was written exactly once.
    """
    d, ref = np.asarray(d), np.asarray(ref)
    if d.shape != ref.shape:
        return f"shapes differ: kernel D {d.shape}, reference {ref.shape}"
    dt = d.dtype
    is_float = dt.kind == "f" or dt == np.dtype(ml_dtypes.bfloat16)
    width = dt.itemsize * 8
    if is_float:
        view = {8: np.int64, 4: np.int32, 2: np.int16}[dt.itemsize]
        db, rb = d.view(view).astype(np.int64), ref.view(view).astype(np.int64)
    else:
        db, rb = d.astype(np.int64), ref.astype(np.int64)
    bad = db != rb
    geo = geometry
    coverage = _coverage(writes, offsets, geo, max_items)
    if not bad.any() and not coverage:
        return None

    head = "kernel D differs from the reference"
    if policy is not None:
        head = f"{name_of(policy)} ({policy.spec.name}): kernel D differs from jwmma.gemm"
    n_bad = int(bad.sum())
    lines = [f"{head}: {n_bad} of {d.size} element(s) differ bitwise"]
    if geo is not None and policy is not None:
        lines.append("  " + geo.describe(policy.spec.lanes))
    lines += ["  store_c: " + s for s in coverage]
    if not n_bad:
        return "\n".join(lines)
    where = np.argwhere(bad)
    lines += _magnitude(d, ref, db, rb, bad, width, is_float)
    n_bad_tiles = n_tiles = None
    if geo is not None:
        tile_lines, n_bad_tiles, n_tiles = _tiles(where, geo, max_items)
        lines += tile_lines
    owner = None
    if offsets is not None and geo is not None:
        owner = _owners(offsets, geo)
        ow = owner[where[:, 0], where[:, 1]]
        ow = ow[ow[:, 0] >= 0]
        if len(ow):
            lines.append(f"  lanes that stored differing elements: {_ranges(ow[:, 1])} "
                         f"(accumulator elements d[{_ranges(ow[:, 2])}])")
    lines += _hint(coverage, n_bad_tiles, n_tiles)
    lines += _first(d, ref, db, rb, where, owner, geo, width, is_float, max_items)
    return "\n".join(lines)
