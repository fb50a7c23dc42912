#!/usr/bin/python3
"""Generates fixtures/density.txt: PyTorch 1.13's is_contiguous() answers for rank-4/5 strides.

Run with the Debian torch: /usr/bin/python3 tests/interop/gen_density_fixture.py
Each line: rank; sizes; strides; is_contiguous(); is_contiguous(channels_last[_3d]).
The tests read the file; they never need torch.
"""
import itertools
import os
import random

import torch

random.seed(1234)
HERE = os.path.dirname(os.path.abspath(__file__))

SHAPES4 = [
    (2, 3, 4, 5), (1, 3, 4, 5), (2, 1, 4, 5), (2, 3, 1, 1), (1, 1, 1, 1), (2, 3, 1, 5), (2, 3, 4, 1),
    (1, 3, 1, 1), (1, 1, 4, 5), (3, 2, 2, 2), (0, 3, 4, 5), (2, 0, 4, 5), (2, 3, 0, 5), (0, 0, 0, 0),
    (2, 1, 1, 1), (3, 4, 2, 1),
]
SHAPES5 = [
    (2, 3, 2, 3, 4), (1, 3, 2, 3, 4), (2, 1, 2, 3, 4), (2, 3, 1, 1, 1), (1, 1, 1, 1, 1), (2, 3, 1, 3, 1),
    (0, 3, 2, 3, 4), (2, 0, 2, 3, 4), (2, 2, 2, 2, 2), (1, 2, 1, 2, 1),
]


def dense_strides(sizes, order):
    """Gap-free strides for memory order `order` (outermost first), size-1 dims counted as 1."""
    strides = [0] * len(sizes)
    s = 1
    for d in reversed(order):
        strides[d] = s
        s *= max(sizes[d], 1)
    return strides


def variants(sizes):
    rank = len(sizes)
    orders = list(itertools.permutations(range(rank)))
    if rank == 5:  # 120 orders: keep the two formats plus a sample
        keep = [(0, 1, 2, 3, 4), (0, 2, 3, 4, 1)]
        orders = keep + random.sample([o for o in orders if o not in keep], 14)
    for order in orders:
        base = dense_strides(sizes, order)
        yield base
        # padded / sliced: grow the stride of each non-innermost position
        for pos in range(rank - 1):
            s = list(base)
            d = order[pos]
            s[d] = base[d] + 1 if base[d] > 0 else 1
            # keep the dims outside it consistent with the padding
            for outer in order[:pos]:
                s[outer] = base[outer] * 2
            yield s
        # arbitrary strides on size-1 dims (torch ignores them)
        if any(x == 1 for x in sizes):
            s = list(base)
            for d in range(rank):
                if sizes[d] == 1:
                    s[d] = random.choice([0, 1, 7, 1000])
            yield s
        # expanded: stride 0 on one dimension
        for d in range(rank):
            s = list(base)
            s[d] = 0
            yield s
        # overlapping: a stride one smaller than dense
        for d in range(rank):
            if base[d] > 1:
                s = list(base)
                s[d] = base[d] - 1
                yield s
    # unit stride everywhere (heavily overlapping)
    yield [1] * rank


def span(sizes, strides):
    if any(x == 0 for x in sizes):
        return 1
    return 1 + sum((x - 1) * s for x, s in zip(sizes, strides))


def main():
    rows = set()
    for shapes, fmt in ((SHAPES4, torch.channels_last), (SHAPES5, torch.channels_last_3d)):
        for sizes in shapes:
            for strides in variants(sizes):
                storage = torch.empty(span(sizes, strides))
                t = storage.as_strided(sizes, strides)
                rows.add((len(sizes), tuple(sizes), tuple(strides), int(t.is_contiguous()),
                          int(t.is_contiguous(memory_format=fmt))))
    out = os.path.join(HERE, "fixtures", "density.txt")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        f.write("# torch %s: rank; sizes; strides; is_contiguous(); is_contiguous(channels_last[_3d])\n"
                % torch.__version__)
        for r in sorted(rows):
            f.write("%d;%s;%s;%d;%d\n" % (r[0], ",".join(map(str, r[1])), ",".join(map(str, r[2])), r[3], r[4]))
    print("wrote %d rows to %s" % (len(rows), out))


if __name__ == "__main__":
    main()
