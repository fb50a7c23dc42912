#!/usr/bin/python3
"""Generate PyTorch 1.13 oracle fixtures for memfmt/strided/op_rules.hpp.

Run with the Debian interpreter that has torch:  /usr/bin/python3 tests/strided_ops/gen_op_fixtures.py
Every input is built with torch.as_strided over a buffer large enough for its strides, so any
stride pattern (permuted, sliced, expanded, odd size-1 strides) can be fed to the op. Each case
records the inputs and the op's output sizes/strides/dtype, or the error message. Seeded, so the
files are deterministic.
"""
import json
import os
import random
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures")
DTYPES = {torch.float32: "float32", torch.float64: "float64"}


def make(sizes, strides, dtype=torch.float32):
    span = 1 + sum((s - 1) * st for s, st in zip(sizes, strides) if s > 0)
    if any(s == 0 for s in sizes):
        span = 1
    return torch.zeros(max(span, 1), dtype=dtype).as_strided(sizes, strides)


def desc(t):
    return {"sizes": list(t.shape), "strides": list(t.stride()), "dtype": DTYPES[t.dtype]}


def dense_strides(sizes, order):
    """Dense strides where order lists dims from outermost to innermost."""
    st = [0] * len(sizes)
    acc = 1
    for d in reversed(order):
        st[d] = acc
        acc *= max(sizes[d], 1)
    return st


def cl_order(rank):
    return [0] + list(range(2, rank)) + [1]


def random_layout(rng, sizes, kind=None):
    """Strides for sizes in one of several layouts, as PyTorch users produce them."""
    rank = len(sizes)
    kinds = ["contig", "cl", "perm", "sliced", "expanded", "odd1", "sliced_cl"]
    if kind is None:
        kind = rng.choice(kinds)
    if kind == "cl" and rank >= 3:
        return dense_strides(sizes, cl_order(rank))
    if kind == "perm":
        order = list(range(rank))
        rng.shuffle(order)
        return dense_strides(sizes, order)
    if kind in ("sliced", "sliced_cl"):
        order = cl_order(rank) if (kind == "sliced_cl" and rank >= 3) else list(range(rank))
        # pad some dims (as if sliced out of a bigger tensor), innermost may get step > 1
        st = [0] * rank
        acc = rng.choice([1, 1, 2])
        for d in reversed(order):
            st[d] = acc
            acc *= max(sizes[d], 1) + rng.choice([0, 0, 1, 3])
        return st
    if kind == "expanded":
        st = dense_strides(sizes, list(range(rank)))
        for d in range(rank):
            if rng.random() < 0.4:
                st[d] = 0
        return st
    if kind == "odd1":
        order = list(range(rank))
        if rng.random() < 0.5 and rank >= 3:
            order = cl_order(rank)
        st = dense_strides(sizes, order)
        for d in range(rank):
            if sizes[d] == 1:
                st[d] = rng.choice([0, 1, 2, 7, st[d], 1000])
        return st
    return dense_strides(sizes, list(range(rank)))


def random_sizes(rng, rank, small=True):
    pool = [1, 1, 2, 3, 4, 5] if small else [1, 2, 3, 4, 6, 7]
    s = [rng.choice(pool) for _ in range(rank)]
    if rng.random() < 0.05:
        s[rng.randrange(rank)] = 0
    return s


def run(fn):
    try:
        return {"out": desc(fn())}
    except Exception as ex:  # noqa: BLE001 - recorded as the oracle's answer
        return {"error": str(ex).split("\n")[0]}


# ---------------------------------------------------------------- pointwise
def gen_pointwise(rng, n):
    cases = []
    for i in range(n):
        rank = rng.choice([1, 2, 3, 4, 4, 4, 4, 5, 5])
        shape = random_sizes(rng, rank)
        nops = rng.choice([1, 2, 2, 2, 2, 3])
        ops = []
        for k in range(nops):
            r = rng.random()
            if r < 0.08 and nops > 1:
                ops.append(None)  # python scalar
                continue
            s = list(shape)
            if r < 0.4:
                # broadcast: drop leading dims and/or set some sizes to 1
                lead = rng.randrange(0, rank + 1) if rng.random() < 0.3 else 0
                s = s[lead:]
                for d in range(len(s)):
                    if rng.random() < 0.3:
                        s[d] = 1
                if rng.random() < 0.3 and rank >= 3:
                    s = [1] * rank
                    s[1] = shape[1]  # per-channel bias [1,C,1,1]
            dtype = torch.float64 if rng.random() < 0.15 else torch.float32
            ops.append(make(s, random_layout(rng, s), dtype))
        if all(o is None for o in ops):
            ops[0] = make(shape, random_layout(rng, shape))

        def fn(ops=ops):
            if len(ops) == 1:
                return torch.neg(ops[0])
            if len(ops) == 2:
                a, b = ops
                if a is None:
                    return 2.0 + b
                if b is None:
                    return a + 2.0
                return a + b
            a, b, c = [torch.tensor(2.0) if o is None else o for o in ops]
            return torch.addcmul(a, b, c)

        rec = run(fn)
        rec["operands"] = [{} if o is None else desc(o) for o in ops]
        cases.append(rec)
    return cases


def gen_pointwise_mixed(rng):
    """Systematic: every pair of layouts on 4-D/5-D shapes incl. ambiguous ones, each order."""
    cases = []
    shapes4 = [[2, 3, 4, 5], [2, 1, 4, 5], [2, 3, 1, 1], [1, 3, 1, 1], [2, 1, 1, 1], [1, 1, 1, 1],
               [2, 3, 0, 5], [1, 3, 1, 4], [4, 3, 2, 1]]
    shapes5 = [[2, 3, 2, 4, 5], [2, 1, 2, 4, 5], [2, 3, 1, 1, 1], [1, 3, 1, 1, 1], [2, 3, 2, 1, 5]]
    kinds = ["contig", "cl", "perm", "sliced", "sliced_cl", "expanded", "odd1"]
    for shape in shapes4 + shapes5:
        for ka in kinds:
            for kb in kinds:
                a = make(shape, random_layout(rng, shape, ka))
                b = make(shape, random_layout(rng, shape, kb))
                rec = run(lambda: a + b)
                rec["operands"] = [desc(a), desc(b)]
                cases.append(rec)
            # per-channel bias, both orders
            bias_shape = [1] * len(shape)
            bias_shape[1] = shape[1]
            for kb in ["contig", "odd1"]:
                a = make(shape, random_layout(rng, shape, ka))
                b = make(bias_shape, random_layout(rng, bias_shape, kb))
                for ops in ([a, b], [b, a]):
                    rec = run(lambda: ops[0] + ops[1])
                    rec["operands"] = [desc(o) for o in ops]
                    cases.append(rec)
    return cases


# ---------------------------------------------------------------- cat
def gen_cat(rng, n):
    cases = []
    for i in range(n):
        rank = rng.choice([1, 2, 3, 4, 4, 4, 5, 5])
        shape = random_sizes(rng, rank)
        dim = rng.randrange(-rank, rank)
        ninp = rng.choice([1, 2, 2, 3, 4])
        inputs = []
        for k in range(ninp):
            s = list(shape)
            s[dim] = rng.choice([0, 1, 2, 3]) if rng.random() < 0.5 else shape[dim]
            r = rng.random()
            if r < 0.07:
                t = torch.empty(0)  # legacy skipped empty tensor
            elif r < 0.1:
                s2 = list(s)
                s2[(dim + 1) % rank] += 1  # shape mismatch
                t = make(s2, random_layout(rng, s2))
            elif r < 0.12 and rank > 1:
                t = make(s[1:], random_layout(rng, s[1:]))  # rank mismatch
            else:
                dt = torch.float64 if rng.random() < 0.1 else torch.float32
                t = make(s, random_layout(rng, s), dt)
            inputs.append(t)
        rec = run(lambda: torch.cat(inputs, dim))
        rec["inputs"] = [desc(t) for t in inputs]
        rec["dim"] = dim
        cases.append(rec)
    return cases


# ---------------------------------------------------------------- conv
def conv_layout(rng, sizes):
    return random_layout(rng, sizes, rng.choice(["contig", "contig", "cl", "cl", "perm", "sliced", "sliced_cl", "odd1"]))


def gen_conv(rng, n):
    cases = []
    for i in range(n):
        sd = rng.choice([1, 2, 2, 2, 3])
        dtype = rng.choice([torch.float32, torch.float32, torch.float64])
        groups = rng.choice([1, 1, 1, 2, 3, 4])
        cin_per_g = rng.choice([1, 1, 2, 3])
        cout_per_g = rng.choice([1, 2, 3])
        depthwise = rng.random() < 0.15
        if depthwise:
            cin_per_g = 1
        if rng.random() < 0.03:
            cin_per_g = 0  # no input channels: PyTorch's "empty" path
        cin = cin_per_g * groups
        cout = cout_per_g * groups
        batch = rng.choice([0, 1, 1, 2, 3, 16, 17]) if rng.random() > 0.03 else 0
        k = [rng.choice([1, 1, 2, 3, 4, 5]) for _ in range(sd)]
        stride = [rng.choice([1, 1, 2, 3])] * (1 if rng.random() < 0.6 else sd)
        if len(stride) > 1:
            stride = [rng.choice([1, 2, 3]) for _ in range(sd)]
        padding = [rng.choice([0, 0, 1, 2]) for _ in range(rng.choice([1, sd]))]
        dilation = [rng.choice([1, 1, 1, 2]) for _ in range(rng.choice([1, sd]))]
        dil_full = dilation * sd if len(dilation) == 1 else dilation
        # mostly big enough for the kernel; sometimes too small (PyTorch's size error)
        spatial = [(k[j] - 1) * dil_full[j] + rng.choice([1, 1, 2, 3, 4, 6]) for j in range(sd)]
        if rng.random() < 0.04:
            spatial[0] = max(0, spatial[0] - 3)
        if rng.random() < 0.1:
            spatial = [max(1, v) if rng.random() < 0.5 else 1 for v in spatial]
        isizes = [batch, cin] + spatial
        if rng.random() < 0.05:
            isizes[1] += 1  # channel mismatch -> error
        if rng.random() < 0.01:
            isizes[1] = 0
        unbatched = rng.random() < 0.1
        if unbatched:
            isizes = isizes[1:]
        wsizes = [cout, cin_per_g] + k
        if rng.random() < 0.02:
            wsizes = wsizes[:-1]  # wrong weight rank
        x = make(isizes, conv_layout(rng, isizes), dtype)
        w = make(wsizes, conv_layout(rng, wsizes), dtype)
        threads = rng.choice([1, 2, 2])
        torch.set_num_threads(threads)
        f = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[sd]
        rec = run(lambda: f(x, w, None, stride, padding, dilation, groups))
        rec.update({"input": desc(x), "weight": desc(w), "stride": stride, "padding": padding,
                    "dilation": dilation, "groups": groups, "threads": threads, "spatial_dims": sd})
        cases.append(rec)
    torch.set_num_threads(2)
    return cases


# ---------------------------------------------------------------- batch_norm
def gen_batch_norm(rng, n):
    cases = []
    for i in range(n):
        rank = rng.choice([2, 3, 4, 4, 4, 5, 5])
        shape = random_sizes(rng, rank)
        shape[1] = max(shape[1], 1)
        x = make(shape, random_layout(rng, shape), rng.choice([torch.float32, torch.float64]))
        c = shape[1]
        training = rng.random() < 0.5
        rm = torch.zeros(c, dtype=x.dtype)
        rv = torch.ones(c, dtype=x.dtype)
        affine = rng.random() < 0.5
        w = torch.ones(c, dtype=x.dtype) if affine else None
        b = torch.zeros(c, dtype=x.dtype) if affine else None
        rec = run(lambda: F.batch_norm(x, rm, rv, w, b, training))
        rec.update({"input": desc(x), "training": training, "affine": affine})
        cases.append(rec)
    return cases


def dump(name, cases):
    path = os.path.join(OUT, name)
    with open(path, "w") as f:
        json.dump({"torch_version": torch.__version__, "cases": cases}, f, separators=(",", ":"))
    print(f"{name}: {len(cases)} cases, {os.path.getsize(path)} bytes")


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.set_num_threads(2)
    dump("pointwise.json", gen_pointwise_mixed(random.Random(1)) + gen_pointwise(random.Random(2), 4000))
    dump("cat.json", gen_cat(random.Random(3), 3000))
    dump("conv.json", gen_conv(random.Random(4), 4000))
    dump("batch_norm.json", gen_batch_norm(random.Random(5), 1500))


if __name__ == "__main__":
    sys.exit(main())
