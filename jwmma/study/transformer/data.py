"""The transformer study's data: a generated language, so that the study needs no download and
the text is the same on every machine and Python version.

numpy's ``RandomState`` draws it (numpy keeps its streams fixed; `corpus_digest` pins them in
the tests). Document ``i`` is the byte string of lines drawn with seed ``i``: ``let x=417`` (a
variable gets a random value), ``x=417`` (the current value of a variable set earlier: a recall
over up to the whole context), ``34+58=92`` (two-digit addition) and English-like sentences from
a small grammar (``the quick fox sees a lamp near my old house.``). The digits of a recalled
value or of a sum are determined by the text before them (the answer kinds `RECALL` and `SUM`);
everything else is random or nearly so. Training documents are 0, 1, 2, ...; evaluation
documents start at `EVAL_OFFSET`. Tokens are bytes (vocabulary 256).
"""
from __future__ import annotations

import hashlib

import numpy as np

__all__ = ["DETS", "ADJS", "NOUNS", "VERBS", "PREPS", "NAMES", "EVAL_OFFSET", "NO_ANSWER", "RECALL", "SUM",
           "document", "documents", "corpus_digest"]

# the grammar of the sentences
DETS = ("the", "a", "one", "every", "my", "this")
ADJS = ("red", "small", "old", "quick", "quiet", "green", "tall", "bright", "lazy", "happy")
NOUNS = ("fox", "bird", "cat", "river", "house", "tree", "robot", "child", "lamp", "ship", "stone", "dog")
VERBS = ("sees", "finds", "likes", "follows", "paints", "moves", "counts", "hears", "builds", "loses")
PREPS = ("near", "under", "behind", "above", "beside")
#: the variables' names
NAMES = "abcdefghijklmnopqrstuvwxyz"
#: the first evaluation document (training documents are numbered from 0)
EVAL_OFFSET = 1 << 30
#: the answer kinds of `document`'s mask: no answer, a recalled value, a sum
NO_ANSWER, RECALL, SUM = 0, 1, 2


def _phrase(r) -> str:
    s = DETS[r.randint(len(DETS))]
    if r.rand() < 0.5:
        s += " " + ADJS[r.randint(len(ADJS))]
    return s + " " + NOUNS[r.randint(len(NOUNS))]


def document(index: int, length: int):
    """Document ``index`` of the generated language (module doc), cut to ``length`` bytes.

    Args:
        index: the document's number, the seed of its ``RandomState``.
        length: how many bytes to keep.
    Returns:
        ``(tokens, answers)``: uint8 bytes (length,) and uint8 answer kinds (length,):
        `RECALL` for the digits of a recalled value, `SUM` for the digits of a sum (both
        determined by the text before them), `NO_ANSWER` elsewhere.
    """
    r = np.random.RandomState(index)
    values: dict = {}
    text, kinds = bytearray(), []
    while len(text) < length:
        u = r.rand()
        answer, kind = "", NO_ANSWER
        if u < 0.3 or not values:
            v = NAMES[r.randint(len(NAMES))]
            values[v] = int(r.randint(1000))
            line = f"let {v}={values[v]}"
        elif u < 0.6:
            keys = sorted(values)
            v = keys[r.randint(len(keys))]
            line, answer, kind = f"{v}=", str(values[v]), RECALL
        elif u < 0.75:
            a, b = int(r.randint(100)), int(r.randint(100))
            line, answer, kind = f"{a}+{b}=", str(a + b), SUM
        else:
            line = f"{_phrase(r)} {VERBS[r.randint(len(VERBS))]} {_phrase(r)}"
            if r.rand() < 0.3:
                line += f" {PREPS[r.randint(len(PREPS))]} {_phrase(r)}"
            line += "."
        text += (line + answer + "\n").encode()
        kinds += [NO_ANSWER] * len(line) + [kind] * len(answer) + [NO_ANSWER]
    return np.frombuffer(bytes(text[:length]), np.uint8).copy(), np.asarray(kinds[:length], np.uint8)


def documents(start: int, count: int, length: int):
    """Documents ``start .. start + count - 1`` as one batch.

    Returns:
        ``(tokens, answers)``: int32 bytes (count, length) and uint8 answer kinds (count,
        length) (`document`).
    """
    toks, kinds = zip(*(document(start + i, length) for i in range(count)))
    return np.stack(toks).astype(np.int32), np.stack(kinds)


def corpus_digest(start: int = 0, count: int = 64, length: int = 257) -> str:
    """SHA-256 (hex, first 16 digits) of documents ``start..start+count-1``: pins the generator."""
    tok, kinds = documents(start, count, length)
    return hashlib.sha256(tok.astype(np.uint8).tobytes() + kinds.tobytes()).hexdigest()[:16]
