#!/usr/bin/python3
"""Record what PyTorch says about strided tensors and memory-format requests.

Run with the Debian interpreter that has torch 1.13:  /usr/bin/python3 tests/strided/gen_format_fixtures.py
It rewrites tests/strided/fixtures/format_*.json (deterministic: fixed seeds, sorted output; a few
minutes, mostly PyTorch building C++ backtraces for the errors it raises).

Every tensor is torch.as_strided over a buffer large enough for its strides, so any sizes and
non-negative strides can be observed. Only PyTorch's own C++ behaviour is recorded; nothing is
computed by a Python re-implementation of the rules:
  - is_contiguous for the three formats: Tensor.is_contiguous(memory_format=f);
  - non_overlapping_and_dense: c10 keeps the strides of a non-overlapping-and-dense tensor in
    empty_like(preserve) and otherwise infers dense ones (at::infer_dense_strides), which always
    differ: inferred strides pass the density check that x's strides failed. So the flag is
    "empty_like(x).stride() == x.stride()";
  - suggest_memory_format: x.to(memory_format=f) returns x itself exactly when f equals the
    suggested format (to_will_alias), so the suggestion is the one format whose .to aliases.

Case layout (compact JSON):
  [sizes, strides, [is_contiguous, is_contiguous_channels_last, is_contiguous_channels_last_3d,
   non_overlapping_and_dense], suggest (index into "formats"), to[4], contiguous[4],
   empty_like[4], clone[4]]
with the four request results in "formats" order, each: true = returns x itself (same sizes and
strides), a list = a new tensor of x's sizes with these strides, an int k = RuntimeError whose
text is errors[k], null = not observed (see Recorder).
"""

import itertools
import json
import os
import random
import sys

import torch

FORMATS = ["contiguous", "channels_last", "channels_last_3d", "preserve"]
TORCH_FORMATS = [torch.contiguous_format, torch.channels_last, torch.channels_last_3d, torch.preserve_format]
OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


class Recorder:
    """Observes PyTorch on each new (sizes, strides) and keeps the cases for one fixture file.

    Each RuntimeError costs PyTorch ~25 ms (it captures a C++ backtrace), so the requests that can
    only fail - a channels_last request at rank != 4, channels_last_3d at rank != 5, and
    .contiguous(preserve) of a tensor PyTorch calls non-contiguous - are observed on a seeded
    random sample of the cases (FULL_RATE) and recorded as null (not observed) on the others.
    Everything else is observed on every case.
    """

    FULL_RATE = 1 / 20

    def __init__(self, seed):
        self.errors = []
        self.cases = {}
        self.rng = random.Random(seed)

    def error_index(self, text):
        if text not in self.errors:
            self.errors.append(text)
        return self.errors.index(text)

    @staticmethod
    def make(sizes, strides):
        span = 1 if 0 in sizes else 1 + sum((s - 1) * st for s, st in zip(sizes, strides))
        buf = torch.zeros(span, dtype=torch.float32)
        return torch.as_strided(buf, sizes, strides)

    def request(self, x, fn, may_alias):
        try:
            y = fn()
        except RuntimeError as e:
            return self.error_index(str(e).split("\n")[0])
        assert list(y.shape) == list(x.shape)
        same = y is x
        if x.numel() > 0:
            assert same == (y.data_ptr() == x.data_ptr()), (x.shape, x.stride())
        if same:
            assert may_alias
            return True
        return list(y.stride())

    def add(self, sizes, strides):
        key = (tuple(sizes), tuple(strides))
        if key in self.cases:
            return
        x = self.make(sizes, strides)
        assert list(x.stride()) == list(strides)
        full = self.rng.random() < self.FULL_RATE
        flags = [x.is_contiguous(memory_format=f) for f in TORCH_FORMATS[:3]]
        flags.append(list(torch.empty_like(x).stride()) == list(strides))
        rank = len(sizes)

        def observed(i, request):
            if full:
                return True
            if (i == 1 and rank != 4) or (i == 2 and rank != 5):
                return False
            return not (request == "contiguous" and i == 3 and not flags[0])

        def run(request, i, fn, may_alias):
            return self.request(x, fn, may_alias) if observed(i, request) else None

        f4 = list(enumerate(TORCH_FORMATS))
        to = [run("to", i, lambda f=f: x.to(memory_format=f), True) for i, f in f4]
        contiguous = [run("contiguous", i, lambda f=f: x.contiguous(memory_format=f), True) for i, f in f4]
        empty_like = [run("empty_like", i, lambda f=f: torch.empty_like(x, memory_format=f), False) for i, f in f4]
        clone = [run("clone", i, lambda f=f: x.clone(memory_format=f), False) for i, f in f4]
        # Exactly one of .to(contiguous / channels_last / channels_last_3d) returns x itself: the
        # suggested format (the unobserved ones would have to alias for this to be wrong, and then
        # none of the observed ones would).
        aliased = [i for i in range(3) if to[i] is True]
        assert len(aliased) == 1, (sizes, strides, to)
        self.cases[key] = [list(sizes), list(strides), [int(v) for v in flags], aliased[0], to, contiguous,
                           empty_like, clone]

    def dump(self, name, meta):
        cases = [self.cases[k] for k in sorted(self.cases)]
        doc = {"generator": "tests/strided/gen_format_fixtures.py", "torch_version": torch.__version__,
               "description": meta, "formats": FORMATS, "errors": self.errors, "cases": cases}
        path = os.path.join(OUT_DIR, name)
        with open(path, "w") as f:
            json.dump(doc, f, separators=(",", ":"))
            f.write("\n")
        print(f"{path}: {len(cases)} cases, {os.path.getsize(path)} bytes", flush=True)


def dense_strides_in_order(sizes, order):
    """Dense strides with dims laid out innermost-first in `order` (size 0/1 count as 1)."""
    strides = [0] * len(sizes)
    s = 1
    for d in order:
        strides[d] = s
        s *= max(sizes[d], 1)
    return strides


def layout_variants(sizes, rng, variant_orders):
    """Dense layouts in every dimension order; for a few orders, also views derived from them."""
    n = len(sizes)
    perms = list(itertools.permutations(range(n)))
    for order in perms if n <= 4 else canonical_orders(n) + rng.sample(perms, 6):
        yield dense_strides_in_order(sizes, order)
    for order in variant_orders(rng):
        base = dense_strides_in_order(sizes, order)
        ones = [d for d in range(n) if sizes[d] == 1]
        # Size-1 dimensions: their stride is free; PyTorch's rules react to some values (ties).
        for d in ones:
            for v in (0, 1, max(base) if base else 0, base[d] * 2 + 1):
                s = list(base)
                s[d] = v
                yield s
        if len(ones) >= 2:
            yield [1 if sizes[d] == 1 else base[d] for d in range(n)]
        # Expanded (stride-0, broadcast) views.
        for d in range(n):
            if sizes[d] > 1:
                s = list(base)
                s[d] = 0
                yield s
        # Sliced views: x[..., ::2, ...] doubles one stride; slicing the outer dims of a larger
        # tensor keeps strides but drops density.
        for d in range(n):
            if sizes[d] > 1:
                s = list(base)
                s[d] *= 2
                yield s
        yield [st * 3 for st in base]


def canonical_orders(n):
    """Contiguous order, and channels-last order for ranks 4 and 5 (innermost dimension first)."""
    orders = [tuple(reversed(range(n)))]
    if n == 4:
        orders.append((1, 3, 2, 0))
    if n == 5:
        orders.append((1, 4, 3, 2, 0))
    return orders


def gen_exhaustive(rec, rank, size_values, extra_random_orders, seed):
    rng = random.Random(seed)
    def variant_orders(r):
        perms = list(itertools.permutations(range(rank)))
        return canonical_orders(rank) + r.sample(perms, min(len(perms), extra_random_orders))
    for sizes in itertools.product(size_values, repeat=rank):
        for strides in layout_variants(list(sizes), rng, variant_orders):
            rec.add(list(sizes), strides)


def gen_small_strides(rec, rank, size_values, stride_values):
    """Every stride tuple from a small set: covers overlap, ties and the N111 rule exhaustively."""
    for sizes in itertools.product(size_values, repeat=rank):
        for strides in itertools.product(stride_values, repeat=rank):
            rec.add(list(sizes), list(strides))


def gen_random(rec, count, seed):
    rng = random.Random(seed)
    while len(rec.cases) < count:
        rank = rng.choice([0, 1, 2, 3, 4, 4, 4, 5, 5, 5, 6])
        sizes = [rng.choice([0, 1, 1, 2, 3, 4, 5, 7]) if rng.random() < 0.97 else 0 for _ in range(rank)]
        if rng.random() < 0.9:
            sizes = [s if s != 0 or rng.random() < 0.3 else 2 for s in sizes]
        order = list(range(rank))
        rng.shuffle(order)
        strides = dense_strides_in_order(sizes, order)
        kind = rng.random()
        if kind < 0.3:
            for d in range(rank):
                if rng.random() < 0.3:
                    strides[d] *= rng.choice([2, 3])
        elif kind < 0.5:
            for d in range(rank):
                if rng.random() < 0.3:
                    strides[d] = 0
        elif kind < 0.7:
            strides = [rng.choice([0, 1, 2, 3, 4, 6, 8, 12, 24]) for _ in range(rank)]
        elif kind < 0.8:
            for d in range(rank):
                if sizes[d] == 1:
                    strides[d] = rng.choice([0, 1, 2, 5, 60, 1000])
        rec.add(sizes, strides)


def main():
    os.makedirs(OUT_DIR, exist_ok=True)

    rec = Recorder(seed=40)
    gen_exhaustive(rec, 4, [0, 1, 2, 3], 1, seed=4)
    rec.dump("format_rank4.json", "rank 4, sizes in {0,1,2,3}^4: dense strides in all 24 orders; for the "
                                  "contiguous, channels-last and one random order also size-1 stride variants, "
                                  "expanded (stride 0) and sliced views")

    rec = Recorder(seed=41)
    gen_small_strides(rec, 4, [1, 2], [0, 1, 2, 4])
    gen_small_strides(rec, 4, [0, 3], [0, 1, 3])
    rec.dump("format_rank4_small_strides.json", "rank 4, every stride tuple: sizes in {1,2}^4 x strides in "
                                                "{0,1,2,4}^4 and sizes in {0,3}^4 x strides in {0,1,3}^4")

    rec = Recorder(seed=50)
    gen_exhaustive(rec, 5, [0, 1, 2], 0, seed=5)
    gen_exhaustive(rec, 5, [1, 3], 0, seed=55)
    rec.dump("format_rank5.json", "rank 5, sizes in {0,1,2}^5 and {1,3}^5: dense strides in the contiguous, "
                                  "channels-last-3d and 6 random orders; for the first two also size-1 stride "
                                  "variants, expanded and sliced views")

    rec = Recorder(seed=51)
    gen_small_strides(rec, 5, [1, 2], [0, 1, 2])
    rec.dump("format_rank5_small_strides.json", "rank 5, every stride tuple in {0,1,2}^5 for sizes in {1,2}^5")

    rec = Recorder(seed=60)
    for rank in (0, 1, 2, 3):
        gen_exhaustive(rec, rank, [0, 1, 2, 3], 2, seed=rank)
    gen_exhaustive(rec, 6, [1, 2], 0, seed=6)
    gen_random(rec, len(rec.cases) + 2000, seed=1234)
    rec.dump("format_other.json", "ranks 0-3 exhaustive over sizes {0,1,2,3} (all orders and views), rank 6 over "
                                  "sizes {1,2}^6, and 2000 random tensors of ranks 0-6")
    return 0


if __name__ == "__main__":
    sys.exit(main())
