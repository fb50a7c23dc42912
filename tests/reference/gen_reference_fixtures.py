#!/usr/bin/python3
"""Generate the PyTorch fixtures of the reference backend's tests (run with Debian's /usr/bin/python3 + torch 1.13).

    /usr/bin/python3 tests/reference/gen_reference_fixtures.py [out_dir]   (default: tests/reference/fixtures)

Everything is computed in float64. Inputs are seeded and lie on a coarse grid (k / 2^s with |k| < 256: at most
8 significant bits), so they are exact in bfloat16, half, float and double and the C++ tests can feed the same
values to every element type; the expected outputs are then the float64 results, to be matched within one ulp of
the element type.

File format (little-endian), read by fixtures.hpp:
  "MFXT" u32 version=1, u32 case count, then per case:
    str name, str op, u32 count + (str key, i64 value)*, u32 count + (str key, f64 value)*,
    u32 count + (str name, u32 rank, i64 sizes[rank], f64 data[numel] in contiguous (NCHW/NCDHW) order)*
  where str = u32 byte count + bytes.
"""
import os
import struct
import sys

import torch
import torch.nn.functional as F

torch.set_default_dtype(torch.float64)
GEN = torch.Generator().manual_seed(20240611)


def grid(shape, scale_bits, sigma=1.0, offset=0.0):
    """Seeded values k / 2^scale_bits, k ~ round(N(offset, sigma) * 2^scale_bits) clipped to |k| <= 255."""
    k = torch.randn(shape, generator=GEN) * sigma * (1 << scale_bits) + offset * (1 << scale_bits)
    k = k.round().clamp(-255, 255)
    return k / (1 << scale_bits)


def w_str(out, s):
    b = s.encode()
    out += struct.pack("<I", len(b)) + b


def write_cases(path, cases):
    out = bytearray(b"MFXT") + struct.pack("<II", 1, len(cases))
    for c in cases:
        w_str(out, c["name"])
        w_str(out, c["op"])
        out += struct.pack("<I", len(c["ints"]))
        for k, v in c["ints"].items():
            w_str(out, k)
            out += struct.pack("<q", int(v))
        out += struct.pack("<I", len(c["reals"]))
        for k, v in c["reals"].items():
            w_str(out, k)
            out += struct.pack("<d", float(v))
        out += struct.pack("<I", len(c["tensors"]))
        for k, t in c["tensors"].items():
            t = t.detach().contiguous().to(torch.float64)
            w_str(out, k)
            out += struct.pack("<I", t.dim()) + struct.pack("<%dq" % t.dim(), *t.shape)
            out += struct.pack("<%dd" % t.numel(), *t.flatten().tolist())
    with open(path, "wb") as f:
        f.write(out)
    print("%s: %d cases, %d bytes" % (path, len(cases), len(out)))


def conv_case(name, n, c, k, spatial, kernel, stride, padding, dilation, groups, bias):
    sr = len(spatial)
    x = grid((n, c) + tuple(spatial), 4).requires_grad_()
    w = grid((k, c // groups) + tuple(kernel), 7, sigma=0.25).requires_grad_()
    b = grid((k,), 5).requires_grad_() if bias else None
    conv = F.conv2d if sr == 2 else F.conv3d
    y = conv(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)
    dy = grid(tuple(y.shape), 4)
    y.backward(dy)
    ints = {"groups": groups, "bias": int(bias)}
    for i in range(sr):
        ints["stride%d" % i], ints["padding%d" % i], ints["dilation%d" % i] = stride[i], padding[i], dilation[i]
    tensors = {"x": x, "w": w, "y": y, "dy": dy, "dx": x.grad, "dw": w.grad}
    if bias:
        tensors["b"], tensors["db"] = b, b.grad
    return {"name": name, "op": "conv%dd" % sr, "ints": ints, "reals": {}, "tensors": tensors}


def conv2d_cases():
    C = conv_case
    return [
        C("1x1", 2, 5, 3, (6, 7), (1, 1), (1, 1), (0, 0), (1, 1), 1, True),
        C("3x3_pad1", 2, 3, 4, (7, 6), (3, 3), (1, 1), (1, 1), (1, 1), 1, True),
        C("7x7_stride2_pad3", 1, 3, 4, (13, 11), (7, 7), (2, 2), (3, 3), (1, 1), 1, True),
        C("3x3_dilation2", 2, 4, 3, (9, 9), (3, 3), (1, 1), (2, 2), (2, 2), 1, False),
        C("groups2", 2, 6, 4, (7, 7), (3, 3), (1, 1), (1, 1), (1, 1), 2, True),
        C("depthwise_stride2", 2, 6, 6, (9, 8), (3, 3), (2, 2), (1, 1), (1, 1), 6, False),
        C("depthwise_multiplier2", 1, 4, 8, (6, 5), (3, 3), (1, 1), (1, 1), (1, 1), 4, True),
        C("odd_c11_k13_mixed", 3, 11, 13, (5, 9), (3, 3), (1, 2), (1, 0), (1, 1), 1, True),
        C("batch1_c17_2x3", 1, 17, 9, (4, 4), (2, 3), (1, 1), (0, 1), (1, 1), 1, False),
        C("stride3_uncovered", 2, 2, 3, (8, 8), (2, 2), (3, 3), (0, 0), (1, 1), 1, True),
        C("everything", 2, 6, 9, (8, 7), (3, 2), (2, 1), (2, 1), (2, 1), 3, True),
    ]


def conv3d_cases():
    C = conv_case
    return [
        C("3x3x3_pad1", 2, 3, 4, (5, 6, 4), (3, 3, 3), (1, 1, 1), (1, 1, 1), (1, 1, 1), 1, True),
        C("1x1x1", 1, 5, 2, (3, 3, 3), (1, 1, 1), (1, 1, 1), (0, 0, 0), (1, 1, 1), 1, False),
        C("groups2_dilated_strided", 2, 4, 6, (6, 7, 6), (2, 3, 3), (2, 2, 1), (0, 2, 1), (1, 2, 1), 2, True),
        C("depthwise", 1, 4, 4, (4, 7, 6), (3, 3, 3), (1, 2, 2), (1, 1, 1), (1, 1, 1), 4, True),
    ]


def bn_params(c):
    gamma = grid((c,), 5, sigma=0.5, offset=1.0)
    beta = grid((c,), 5, sigma=0.5)
    rmean = grid((c,), 5, sigma=0.5)
    rvar = grid((c,), 5, sigma=0.25, offset=1.0).abs() + 0.25
    return gamma, beta, rmean, rvar


def bn_input(shape):
    c = shape[1]
    # Per-channel offsets and spreads, so the statistics differ between channels.
    scale = grid((1, c) + (1,) * (len(shape) - 2), 3, sigma=0.5, offset=1.0).abs() + 0.25
    shift = grid((1, c) + (1,) * (len(shape) - 2), 3, sigma=1.0)
    return ((grid(shape, 4) * scale + shift) * 16).round().clamp(-255, 255) / 16  # back on the 1/16 grid


def bn_train_case(name, shape, relu, residual, eps=1e-5, momentum=0.1):
    c = shape[1]
    x = bn_input(shape).requires_grad_()
    gamma, beta, rmean, rvar = bn_params(c)
    gamma.requires_grad_()
    beta.requires_grad_()
    r = grid(shape, 4).requires_grad_() if residual else None
    # Saved statistics from the native op (the values PyTorch's backward consumes).
    _, saved_mean, saved_invstd = torch.native_batch_norm(x.detach(), gamma.detach(), beta.detach(), rmean.clone(),
                                                          rvar.clone(), True, momentum, eps)
    rm, rv = rmean.clone(), rvar.clone()
    y = F.batch_norm(x, rm, rv, gamma, beta, training=True, momentum=momentum, eps=eps)
    if residual:
        y = y + r
    if relu:
        y = F.relu(y)
    dy = grid(shape, 4)
    y.backward(dy)
    # Cross-check the documented semantics before freezing them into a fixture.
    dims = [0] + list(range(2, len(shape)))
    m = x.numel() // c
    mean = x.detach().mean(dims)
    var = x.detach().var(dims, unbiased=False)
    assert torch.allclose(saved_mean, mean, rtol=1e-12, atol=1e-12)
    assert torch.allclose(saved_invstd, 1 / torch.sqrt(var + eps), rtol=1e-12, atol=1e-12)
    assert torch.allclose(rv, (1 - momentum) * rvar + momentum * var * m / (m - 1), rtol=1e-12, atol=1e-12)
    tensors = {"x": x, "gamma": gamma, "beta": beta, "running_mean_in": rmean, "running_var_in": rvar}
    if residual:
        tensors["residual"] = r
    tensors.update({"y": y, "running_mean": rm, "running_var": rv, "saved_mean": saved_mean,
                    "saved_invstd": saved_invstd, "dy": dy, "dx": x.grad, "dgamma": gamma.grad, "dbeta": beta.grad})
    if residual:
        tensors["dresidual"] = r.grad
    return {"name": name, "op": "bn_train", "ints": {"relu": int(relu), "residual": int(residual)},
            "reals": {"epsilon": eps, "momentum": momentum}, "tensors": tensors}


def bn_eval_case(name, shape, relu, residual, eps=1e-5):
    c = shape[1]
    x = bn_input(shape)
    gamma, beta, rmean, rvar = bn_params(c)
    r = grid(shape, 4) if residual else None
    y = F.batch_norm(x, rmean, rvar, gamma, beta, training=False, eps=eps)
    if residual:
        y = y + r
    if relu:
        y = F.relu(y)
    tensors = {"x": x, "gamma": gamma, "beta": beta, "running_mean": rmean, "running_var": rvar}
    if residual:
        tensors["residual"] = r
    tensors["y"] = y
    return {"name": name, "op": "bn_eval", "ints": {"relu": int(relu), "residual": int(residual)},
            "reals": {"epsilon": eps, "momentum": 0.0}, "tensors": tensors}


def bn_cases():
    return [
        bn_train_case("train_plain", (4, 3, 5, 6), False, False),
        bn_train_case("train_relu", (2, 5, 3, 7), True, False),
        bn_train_case("train_relu_residual", (3, 4, 4, 3), True, True, eps=1e-3, momentum=0.3),
        bn_train_case("train_residual_c11", (2, 11, 3, 3), False, True),
        bn_train_case("train_two_values", (1, 4, 1, 2), False, False, momentum=0.5),
        bn_train_case("train3d_relu_residual", (2, 3, 3, 4, 5), True, True),
        bn_train_case("train3d_plain", (3, 2, 2, 3, 2), False, False, eps=1e-4, momentum=1.0),
        bn_eval_case("eval_plain", (2, 5, 4, 4), False, False),
        bn_eval_case("eval_relu_residual", (3, 3, 3, 5), True, True, eps=1e-3),
        bn_eval_case("eval3d_relu", (2, 4, 2, 3, 3), True, False),
    ]


# ---------------------------------------------------------------- layers other than conv and batch norm
# Enum values as in include/memfmt/layers/layer_params.hpp.
ACTIVATIONS = ["identity", "relu", "relu6", "silu", "sigmoid", "hardsigmoid", "hardswish", "tanh", "leaky_relu", "clip",
               "elu", "gelu", "gelu_tanh", "softplus", "mish"]
BINARY = ["add", "sub", "mul", "div"]


def case(name, op, ints, reals, tensors):
    return {"name": name, "op": op, "ints": ints, "reals": reals, "tensors": tensors}


def spatial_ints(prefix, values):
    return {"%s%d" % (prefix, i): v for i, v in enumerate(values)}


def activation_cases():
    cases = []
    for kind, name in enumerate(ACTIVATIONS[:8]):
        x = grid((2, 3, 4, 5), 2, sigma=3.0)
        # The kinks, where PyTorch's derivative convention matters.
        x.view(-1)[:8] = torch.tensor([-3.0, 0.0, 3.0, 6.0, -6.0, 0.25, -0.25, 2.75])
        x.requires_grad_()
        f = {"identity": lambda t: t, "relu": F.relu, "relu6": F.relu6, "silu": F.silu, "sigmoid": torch.sigmoid,
             "hardsigmoid": F.hardsigmoid, "hardswish": F.hardswish, "tanh": torch.tanh}[name]
        y = f(x)
        dy = grid(tuple(y.shape), 4)
        y.backward(dy)
        dx = x.grad
        if name == "hardsigmoid":
            # PyTorch's backward multiplies by 1/6 rounded to float even in float64; record the exact
            # derivative after checking it is what PyTorch means.
            exact = torch.where((x > -3) & (x < 3), dy / 6, torch.zeros_like(dy)).detach()
            assert torch.allclose(dx, exact, rtol=1e-7, atol=0)
            dx = exact
        cases.append(case(name, "activation", {"kind": kind}, {}, {"x": x, "y": y, "dy": dy, "dx": dx}))
    return cases


def parameterized_activation_cases():
    """Activations with parameters (alpha, beta as in activation_params); generated after every other
    case, so that the random draws of the earlier cases stay as they were."""
    def hardsigmoid(alpha, beta):
        return lambda t: torch.clamp(alpha * t + beta, 0.0, 1.0)
    rows = [("leaky_relu", 0.2, 0.0, lambda t: F.leaky_relu(t, 0.2)),
            ("leaky_relu", 0.01, 0.0, F.leaky_relu),
            ("elu", 0.7, 0.0, lambda t: F.elu(t, alpha=0.7)),
            ("clip", -2.0, 1.5, lambda t: F.hardtanh(t, -2.0, 1.5)),
            ("hardsigmoid", 0.2, 0.5, hardsigmoid(0.2, 0.5))]
    cases = []
    for name, alpha, beta, f in rows:
        x = grid((2, 3, 4, 5), 2, sigma=3.0)
        x.view(-1)[:8] = torch.tensor([-2.5, 0.0, 2.5, -2.0, 1.5, 0.25, -0.25, 2.75])  # the kinks
        x.requires_grad_()
        y = f(x)
        dy = grid(tuple(y.shape), 4)
        y.backward(dy)
        dx = x.grad
        if name == "hardsigmoid":
            # torch.clamp passes the gradient on its bounds too; memfmt's hardsigmoid, as PyTorch's own,
            # does not. Record the strict window after checking PyTorch agrees off the bounds.
            t = (alpha * x + beta).detach()
            exact = torch.where((t > 0) & (t < 1), dy * alpha, torch.zeros_like(dy))
            off_bounds = (t != 0) & (t != 1)
            assert torch.allclose(dx[off_bounds], exact[off_bounds], rtol=1e-12, atol=0)
            dx = exact
        cases.append(case("%s(%g, %g)" % (name, alpha, beta), "activation", {"kind": ACTIVATIONS.index(name)},
                          {"alpha": alpha, "beta": beta}, {"x": x, "y": y, "dy": dy, "dx": dx}))
    return cases


def binary_case(name, kind, a_shape, b_shape):
    a = grid(a_shape, 4).requires_grad_()
    b = grid(b_shape, 4)
    if BINARY[kind] == "div":  # away from 0: b in [0.5, 4] up to sign
        b = torch.where(b >= 0, b + 0.5, b - 0.5)
    b.requires_grad_()
    y = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div}[BINARY[kind]](a, b)
    dy = grid(tuple(y.shape), 4)
    y.backward(dy)
    return case(name, "binary", {"kind": kind}, {}, {"a": a, "b": b, "y": y, "dy": dy, "da": a.grad, "db": b.grad})


def binary_cases():
    return [
        binary_case("add_same", 0, (2, 3, 4, 5), (2, 3, 4, 5)),
        binary_case("sub_channel_bias", 1, (2, 3, 4, 5), (1, 3, 1, 1)),
        binary_case("mul_squeeze_excite", 2, (2, 4, 3, 3), (2, 4, 1, 1)),
        binary_case("mul_both_broadcast", 2, (2, 1, 3, 1), (1, 4, 1, 5)),
        binary_case("div_broadcast_a", 3, (1, 3, 1, 4), (2, 3, 5, 4)),
        binary_case("add3d_broadcast", 0, (2, 3, 2, 3, 4), (2, 3, 1, 1, 1)),
        binary_case("div3d", 3, (1, 2, 2, 3, 2), (1, 2, 2, 3, 2)),
    ]


def pool_case(name, kind, shape, kernel, stride, padding, ceil_mode=False, cip=True, padding_end=None, ties=False):
    sr = len(shape) - 2
    # Coarse values make ties, so the first-max rule is exercised.
    x = (grid(shape, 1, sigma=1.0) if ties else grid(shape, 4)).requires_grad_()
    asym = padding_end is not None and list(padding_end) != list(padding)
    pe = list(padding_end) if padding_end is not None else list(padding)
    if asym:
        # Per-side padding: pad explicitly (-inf never wins a max; zeros count in an average
        # with count_include_pad), then pool without padding.
        assert ceil_mode is False and (kind == "max" or cip)
        pads = []
        for i in reversed(range(sr)):
            pads += [padding[i], pe[i]]
        xp = F.pad(x, pads, value=float("-inf") if kind == "max" else 0.0)
        pool = {("max", 2): F.max_pool2d, ("max", 3): F.max_pool3d, ("avg", 2): F.avg_pool2d,
                ("avg", 3): F.avg_pool3d}[(kind, sr)]
        y = pool(xp, kernel, stride)
    elif kind == "max":
        y = (F.max_pool2d if sr == 2 else F.max_pool3d)(x, kernel, stride, padding, ceil_mode=ceil_mode)
    else:
        y = (F.avg_pool2d if sr == 2 else F.avg_pool3d)(x, kernel, stride, padding, ceil_mode=ceil_mode,
                                                      count_include_pad=cip)
    dy = grid(tuple(y.shape), 4)
    y.backward(dy)
    ints = {"kind": 0 if kind == "max" else 1, "ceil_mode": int(ceil_mode), "count_include_pad": int(cip)}
    ints.update(spatial_ints("kernel", kernel))
    ints.update(spatial_ints("stride", stride))
    ints.update(spatial_ints("padding", padding))
    ints.update(spatial_ints("padding_end", pe))
    return case(name, "pool", ints, {}, {"x": x, "y": y, "dy": dy, "dx": x.grad})


def global_pool_case(name, shape):
    x = grid(shape, 4).requires_grad_()
    y = F.adaptive_avg_pool2d(x, 1) if len(shape) == 4 else F.adaptive_avg_pool3d(x, 1)
    dy = grid(tuple(y.shape), 4)
    y.backward(dy)
    return case(name, "global_avg_pool", {}, {}, {"x": x, "y": y, "dy": dy, "dx": x.grad})


def pool_cases():
    P = pool_case
    return [
        P("max_stem_3x3_s2_p1_ties", "max", (2, 3, 9, 8), (3, 3), (2, 2), (1, 1), ties=True),
        P("max_2x2_s2_ceil", "max", (1, 2, 7, 7), (2, 2), (2, 2), (0, 0), ceil_mode=True),
        P("max_3x3_s2_p1_ceil_ties", "max", (2, 2, 8, 9), (3, 3), (2, 2), (1, 1), ceil_mode=True, ties=True),
        P("max_2x3_s1x2", "max", (1, 3, 5, 7), (2, 3), (1, 2), (1, 1)),
        P("max_asym_pad", "max", (2, 2, 6, 7), (3, 3), (2, 2), (0, 1), padding_end=(1, 0)),
        P("avg_3x3_p1_cip", "avg", (2, 3, 5, 6), (3, 3), (1, 1), (1, 1), cip=True),
        P("avg_3x3_p1_no_cip", "avg", (2, 3, 5, 6), (3, 3), (1, 1), (1, 1), cip=False),
        P("avg_3x3_s2_p1_ceil_cip", "avg", (1, 2, 8, 7), (3, 3), (2, 2), (1, 1), ceil_mode=True, cip=True),
        P("avg_3x3_s2_p1_ceil_no_cip", "avg", (1, 2, 8, 7), (3, 3), (2, 2), (1, 1), ceil_mode=True, cip=False),
        P("avg_2x3_s2_ceil", "avg", (2, 2, 5, 8), (2, 3), (2, 2), (0, 1), ceil_mode=True),
        P("avg_asym_pad_cip", "avg", (1, 3, 6, 5), (2, 3), (2, 1), (1, 0), padding_end=(0, 2)),
        P("max3d_3_s2_p1", "max", (1, 2, 5, 6, 5), (3, 3, 3), (2, 2, 2), (1, 1, 1), ties=True),
        P("avg3d_2_s2_ceil_no_cip", "avg", (1, 2, 5, 5, 4), (2, 2, 2), (2, 2, 2), (1, 0, 1), ceil_mode=True,
          cip=False),
        global_pool_case("global_avg", (2, 3, 4, 5)),
        global_pool_case("global_avg3d", (1, 4, 2, 3, 3)),
    ]


def upsample_case(name, mode, shape, out):
    x = grid(shape, 4).requires_grad_()
    sr = len(shape) - 2
    if mode == "nearest":
        # The documented integer rule must agree with PyTorch's float scale for these sizes.
        for i in range(sr):
            src = [min(o * shape[2 + i] // out[i], shape[2 + i] - 1) for o in range(out[i])]
            idx = F.interpolate(torch.arange(shape[2 + i], dtype=torch.float64).view(1, 1, -1), size=out[i],
                                mode="nearest").view(-1).long().tolist()
            assert src == idx, (name, i, src, idx)
        y = F.interpolate(x, size=out, mode="nearest")
    else:
        y = F.interpolate(x, size=out, mode="bilinear" if sr == 2 else "trilinear", align_corners=False)
    dy = grid(tuple(y.shape), 4)
    y.backward(dy)
    ints = {"mode": 0 if mode == "nearest" else 1}
    ints.update(spatial_ints("output", out))
    return case(name, "upsample", ints, {}, {"x": x, "y": y, "dy": dy, "dx": x.grad})


def upsample_cases():
    U = upsample_case
    return [
        U("nearest_2x", "nearest", (2, 3, 3, 4), (6, 8)),
        U("nearest_7x8_from_3x5", "nearest", (1, 2, 3, 5), (7, 8)),
        U("nearest_down", "nearest", (1, 2, 6, 5), (4, 3)),
        U("bilinear_2x", "linear", (2, 3, 3, 4), (6, 8)),
        U("bilinear_odd", "linear", (1, 2, 4, 5), (7, 3)),
        U("nearest3d_2x", "nearest", (1, 2, 2, 3, 2), (4, 6, 4)),
        U("trilinear", "linear", (1, 2, 2, 3, 3), (4, 5, 6)),
    ]


def pad_case(name, mode, shape, begin, end, value=0.0):
    x = grid(shape, 4).requires_grad_()
    sr = len(shape) - 2
    pads = []
    for i in reversed(range(sr)):
        pads += [begin[i], end[i]]
    y = F.pad(x, pads, mode=mode, value=value) if mode == "constant" else F.pad(x, pads, mode=mode)
    dy = grid(tuple(y.shape), 4)
    y.backward(dy)
    ints = {"mode": ["constant", "reflect", "replicate"].index(mode)}
    ints.update(spatial_ints("begin", begin))
    ints.update(spatial_ints("end", end))
    return case(name, "pad", ints, {"value": value}, {"x": x, "y": y, "dy": dy, "dx": x.grad})


def pad_cases():
    return [
        pad_case("constant_asym", "constant", (2, 3, 3, 4), (1, 0), (2, 3), value=0.5),
        pad_case("reflect", "reflect", (2, 3, 5, 6), (1, 2), (2, 1)),
        pad_case("reflect_max", "reflect", (1, 2, 3, 4), (2, 3), (2, 3)),
        pad_case("replicate_wide", "replicate", (1, 2, 3, 4), (2, 1), (4, 3)),
        pad_case("reflect3d", "reflect", (1, 2, 3, 4, 3), (1, 2, 0), (2, 1, 2)),
        pad_case("replicate3d", "replicate", (1, 2, 2, 3, 2), (1, 0, 2), (0, 3, 1)),
        pad_case("constant3d", "constant", (1, 2, 2, 2, 3), (1, 1, 0), (0, 1, 2), value=-1.0),
    ]


def group_norm_case(name, shape, groups, affine=True, eps=1e-5):
    n, c = shape[0], shape[1]
    x = bn_input(shape).requires_grad_()
    gamma = grid((c,), 5, sigma=0.5, offset=1.0).requires_grad_()
    beta = grid((c,), 5, sigma=0.5).requires_grad_()
    hw = x.numel() // (n * c)
    _, mean, rstd = torch.native_group_norm(x.detach(), gamma.detach(), beta.detach(), n, c, hw, groups, eps)
    y = F.group_norm(x, groups, gamma if affine else None, beta if affine else None, eps)
    dy = grid(shape, 4)
    y.backward(dy)
    xg = x.detach().view(n, groups, -1)
    assert torch.allclose(mean, xg.mean(-1), rtol=1e-12, atol=1e-12)
    assert torch.allclose(rstd, 1 / torch.sqrt(xg.var(-1, unbiased=False) + eps), rtol=1e-12, atol=1e-12)
    tensors = {"x": x, "y": y, "saved_mean": mean.reshape(-1), "saved_invstd": rstd.reshape(-1), "dy": dy,
               "dx": x.grad}
    if affine:
        tensors.update({"gamma": gamma, "beta": beta, "dgamma": gamma.grad, "dbeta": beta.grad})
    return case(name, "group_norm", {"groups": groups, "affine": int(affine)}, {"epsilon": eps}, tensors)


def group_norm_cases():
    return [
        group_norm_case("groups2_c6", (2, 6, 3, 4), 2),
        group_norm_case("groups1", (2, 4, 3, 3), 1, eps=1e-3),
        group_norm_case("instance_affine", (2, 4, 3, 3), 4),
        group_norm_case("instance_plain", (3, 3, 2, 5), 3, affine=False),
        group_norm_case("groups2_3d", (2, 4, 2, 3, 2), 2),
    ]


def softmax_case(name, shape, log):
    x = grid(shape, 3, sigma=2.0).requires_grad_()
    y = (F.log_softmax if log else F.softmax)(x, dim=1)
    dy = grid(shape, 4)
    y.backward(dy)
    return case(name, "softmax", {"log": int(log)}, {}, {"x": x, "y": y, "dy": dy, "dx": x.grad})


def softmax_cases():
    return [
        softmax_case("softmax", (2, 5, 3, 4), False),
        softmax_case("log_softmax", (2, 5, 3, 4), True),
        softmax_case("softmax_nf", (3, 10, 1, 1), False),
        softmax_case("log_softmax3d", (1, 4, 2, 3, 2), True),
    ]


def linear_case(name, x_shape, k, bias):
    x = grid(x_shape, 4).requires_grad_()
    f = x[0].numel()
    w = grid((k, f), 7, sigma=0.25).requires_grad_()
    b = grid((k,), 5).requires_grad_() if bias else None
    y = F.linear(torch.flatten(x, 1), w, b)
    dy = grid(tuple(y.shape), 4)
    y.backward(dy)
    y4 = y.detach().view((x_shape[0], k) + (1,) * (len(x_shape) - 2))
    tensors = {"x": x, "w": w, "y": y4, "dy": dy.view(y4.shape), "dx": x.grad, "dw": w.grad}
    if bias:
        tensors.update({"b": b, "db": b.grad})
    return case(name, "linear", {"bias": int(bias)}, {}, tensors)


def linear_cases():
    return [
        linear_case("nf_bias", (3, 8, 1, 1), 5, True),
        linear_case("flatten_no_bias", (2, 3, 2, 2), 4, False),
        linear_case("flatten3d_bias", (2, 2, 2, 1, 2), 3, True),
    ]


def conv_asym_case(name, n, c, k, spatial, kernel, stride, padding, padding_end, groups):
    sr = len(spatial)
    x = grid((n, c) + tuple(spatial), 4).requires_grad_()
    w = grid((k, c // groups) + tuple(kernel), 7, sigma=0.25).requires_grad_()
    b = grid((k,), 5).requires_grad_()
    pads = []
    for i in reversed(range(sr)):
        pads += [padding[i], padding_end[i]]
    y = (F.conv2d if sr == 2 else F.conv3d)(F.pad(x, pads), w, b, stride=stride, groups=groups)
    dy = grid(tuple(y.shape), 4)
    y.backward(dy)
    ints = {"groups": groups}
    ints.update(spatial_ints("stride", stride))
    ints.update(spatial_ints("padding", padding))
    ints.update(spatial_ints("padding_end", padding_end))
    return case(name, "conv_asym", ints, {}, {"x": x, "w": w, "b": b, "y": y, "dy": dy, "dx": x.grad,
                                               "dw": w.grad, "db": b.grad})


def conv_asym_cases():
    return [
        conv_asym_case("same_3x3_s2", 2, 3, 4, (7, 8), (3, 3), (2, 2), (0, 1), (1, 1), 1),
        conv_asym_case("onnx_pads_2x4", 1, 4, 6, (5, 6), (2, 4), (1, 1), (1, 2), (0, 1), 2),
        conv_asym_case("asym3d", 1, 2, 3, (3, 4, 4), (2, 3, 3), (1, 2, 1), (1, 0, 2), (0, 1, 0), 1),
    ]


# rearrange_kind and block_order as in layer_params.hpp.
REARRANGE = ["channel_shuffle", "depth_to_space", "space_to_depth", "transpose"]
ORDERS = ["crd", "dcr"]


def onnx_depth_to_space_dcr(x, b):
    """ONNX DepthToSpace in its default DCR mode, as the operator's specification writes it."""
    n, c, h, w = x.shape
    t = x.reshape(n, b, b, c // (b * b), h, w).permute(0, 3, 4, 1, 5, 2)
    return t.reshape(n, c // (b * b), h * b, w * b)


def onnx_space_to_depth(x, b):
    """ONNX SpaceToDepth (its only order, DCR), as the operator's specification writes it."""
    n, c, h, w = x.shape
    t = x.reshape(n, c, h // b, b, w // b, b).permute(0, 3, 5, 1, 2, 4)
    return t.reshape(n, c * b * b, h // b, w // b)


def rearrange_case(name, kind, factor, order, shape):
    x = grid(shape, 4).requires_grad_()
    if kind == "channel_shuffle":
        # torchvision's ShuffleNet formula (F.channel_shuffle has no derivative in torch 1.13), which
        # must agree with F.channel_shuffle.
        n, c = shape[:2]
        y = x.reshape((n, factor, c // factor) + shape[2:]).transpose(1, 2).reshape(shape)
        assert torch.equal(y, F.channel_shuffle(x.detach(), factor)), name
    elif kind == "depth_to_space":
        y = F.pixel_shuffle(x, factor) if order == "crd" else onnx_depth_to_space_dcr(x, factor)
    else:
        y = F.pixel_unshuffle(x, factor) if order == "crd" else onnx_space_to_depth(x, factor)
    dy = grid(tuple(y.shape), 4)
    y.backward(dy)
    ints = {"kind": REARRANGE.index(kind), "factor": factor, "order": ORDERS.index(order)}
    return case(name, "rearrange", ints, {}, {"x": x, "y": y, "dy": dy, "dx": x.grad})


def rearrange_cases():
    return [
        rearrange_case("channel_shuffle_2", "channel_shuffle", 2, "crd", (2, 6, 3, 4)),
        rearrange_case("channel_shuffle_3", "channel_shuffle", 3, "crd", (1, 12, 2, 3)),
        rearrange_case("channel_shuffle_3d", "channel_shuffle", 2, "crd", (2, 4, 2, 3, 2)),
        rearrange_case("pixel_shuffle_2", "depth_to_space", 2, "crd", (2, 12, 3, 2)),
        rearrange_case("pixel_shuffle_3", "depth_to_space", 3, "crd", (1, 9, 2, 2)),
        rearrange_case("depth_to_space_dcr", "depth_to_space", 2, "dcr", (2, 8, 2, 3)),
        rearrange_case("pixel_unshuffle_2", "space_to_depth", 2, "crd", (2, 3, 4, 6)),
        rearrange_case("space_to_depth_dcr", "space_to_depth", 2, "dcr", (1, 2, 6, 4)),
    ]


def gelu_and_layer_norm_cases():
    """The exact GELU (F.gelu) and layer norm over C (F.layer_norm of the channels-last permute,
    ConvNeXt's LayerNorm2d), appended after every other case so the earlier draws stay as they were."""
    x = grid((2, 3, 4, 5), 2, sigma=3.0)
    x.view(-1)[:4] = torch.tensor([-3.0, 0.0, 3.0, -0.25])
    x.requires_grad_()
    y = F.gelu(x)
    dy = grid(tuple(y.shape), 4)
    y.backward(dy)
    cases = [case("gelu", "activation", {"kind": ACTIVATIONS.index("gelu")}, {}, {"x": x, "y": y, "dy": dy, "dx": x.grad})]
    for name, shape, affine, eps in [("layer_norm_c6", (2, 6, 3, 4), True, 1e-6), ("layer_norm_plain", (3, 4, 2, 3), False, 1e-5),
                                     ("layer_norm_3d", (2, 5, 2, 3, 2), True, 1e-3)]:
        c = shape[1]
        x = bn_input(shape).requires_grad_()
        gamma = grid((c,), 5, sigma=0.5, offset=1.0).requires_grad_()
        beta = grid((c,), 5, sigma=0.5).requires_grad_()
        last = [0] + list(range(2, len(shape))) + [1]
        first = [0, len(shape) - 1] + list(range(1, len(shape) - 1))
        xp = x.permute(*last)
        y = F.layer_norm(xp, (c,), gamma if affine else None, beta if affine else None, eps).permute(*first)
        _, mean, rstd = torch.native_layer_norm(xp.detach(), (c,), gamma.detach(), beta.detach(), eps)
        dy = grid(shape, 4)
        y.backward(dy)
        tensors = {"x": x, "y": y, "saved_mean": mean.reshape(-1), "saved_invstd": rstd.reshape(-1), "dy": dy,
                   "dx": x.grad}
        if affine:
            tensors.update({"gamma": gamma, "beta": beta, "dgamma": gamma.grad, "dbeta": beta.grad})
        cases.append(case(name, "layer_norm", {"affine": int(affine)}, {"epsilon": eps}, tensors))
    return cases


def gelu_tanh_cases():
    """The tanh GELU (F.gelu(x, approximate="tanh")), appended last so the earlier draws stay as they were."""
    x = grid((2, 3, 4, 5), 6, sigma=3.0)
    x.view(-1)[:4] = torch.tensor([-12.0, 0.0, 3.0, -0.25])
    x.requires_grad_()
    y = F.gelu(x, approximate="tanh")
    dy = grid(tuple(y.shape), 7)
    y.backward(dy)
    return [case("gelu_tanh", "activation", {"kind": ACTIVATIONS.index("gelu_tanh")}, {},
                 {"x": x, "y": y, "dy": dy, "dx": x.grad})]


def softplus_and_mish_cases():
    """Softplus (its exact ln(1 + e^x): a threshold past every input) and Mish, appended last so the
    earlier draws stay as they were."""
    cases = []
    for name, f in [("softplus", lambda t: F.softplus(t, beta=1, threshold=100.0)), ("mish", F.mish)]:
        x = grid((2, 3, 4, 5), 6, sigma=3.0)
        x.view(-1)[:6] = torch.tensor([-30.0, -12.0, 0.0, 0.25, 3.0, 15.0])
        x.requires_grad_()
        y = f(x)
        dy = grid(tuple(y.shape), 7)
        y.backward(dy)
        cases.append(case(name, "activation", {"kind": ACTIVATIONS.index(name)}, {},
                          {"x": x, "y": y, "dy": dy, "dx": x.grad}))
    return cases


def transpose_case(name, shape, perm):
    """x.permute(perm) made contiguous, N and C in place: rearrange_kind::transpose."""
    x = grid(shape, 4).requires_grad_()
    y = x.permute(perm).contiguous()
    dy = grid(tuple(y.shape), 4)
    y.backward(dy)
    ints = {"kind": REARRANGE.index("transpose"), "factor": 1, "order": 0}
    ints.update(spatial_ints("perm", perm[2:]))
    return case(name, "rearrange", ints, {}, {"x": x, "y": y, "dy": dy, "dx": x.grad})


def transpose_cases():
    """Transposes of spatial dims, appended after every other case so the earlier draws stay as they were."""
    return [
        transpose_case("transpose_hw", (2, 3, 4, 5), (0, 1, 3, 2)),
        transpose_case("transpose_hw_pooled", (2, 5, 1, 6), (0, 1, 3, 2)),
        transpose_case("transpose_dwh", (1, 2, 2, 3, 4), (0, 1, 4, 2, 3)),
        transpose_case("transpose_whd", (2, 3, 3, 2, 4), (0, 1, 4, 3, 2)),
    ]


def lrn_onnx(x, size, alpha, beta, bias):
    """ONNX's LRN, written as PyTorch 1.13 writes local_response_norm but with ONNX's window: (size - 1) // 2
    channels before c and the rest after (PyTorch puts size // 2 before)."""
    before = (size - 1) // 2
    sizes = x.size()
    div = x.mul(x).unsqueeze(1).reshape(sizes[0], 1, sizes[1], sizes[2], -1)
    div = F.pad(div, (0, 0, 0, 0, before, size - 1 - before))
    div = F.avg_pool3d(div, (size, 1, 1), stride=1).squeeze(1).reshape(sizes)
    return x / div.mul(alpha).add(bias).pow(beta)


def lrn_case(name, shape, size, alpha, beta, k, onnx_window=False):
    """Local response norm across C; "before" is the window's channels before c (PyTorch: size // 2)."""
    x = grid(shape, 3, sigma=2.0).requires_grad_()
    if onnx_window:
        y = lrn_onnx(x, size, alpha, beta, k)
    else:
        y = F.local_response_norm(x, size, alpha=alpha, beta=beta, k=k)
    dy = grid(tuple(y.shape), 4)
    y.backward(dy)
    before = (size - 1) // 2 if onnx_window else size // 2
    return case(name, "lrn", {"size": size, "before": before}, {"alpha": alpha, "beta": beta, "bias": k},
                {"x": x, "y": y, "dy": dy, "dx": x.grad})


def lrn_cases():
    """Appended after every other case, so the earlier draws stay as they were."""
    return [
        lrn_case("lrn_alexnet", (2, 7, 3, 4), 5, 1e-4 * 2048, 0.75, 2.0),
        lrn_case("lrn_even", (2, 6, 2, 3), 4, 0.5, 0.75, 1.0),
        lrn_case("lrn_even_onnx", (2, 6, 2, 3), 4, 0.5, 0.75, 1.0, onnx_window=True),
        lrn_case("lrn_wide", (1, 3, 2, 2), 7, 0.25, 1.5, 0.5),
        lrn_case("lrn3d", (1, 5, 2, 3, 2), 3, 0.125, 0.5, 1.0),
    ]


def layer_cases():
    return (activation_cases() + binary_cases() + pool_cases() + upsample_cases() + pad_cases() +
            group_norm_cases() + softmax_cases() + linear_cases() + conv_asym_cases() +
            parameterized_activation_cases() + rearrange_cases() + gelu_and_layer_norm_cases() + gelu_tanh_cases() +
            softplus_and_mish_cases() + transpose_cases() + lrn_cases())


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                  "fixtures")
    os.makedirs(out_dir, exist_ok=True)
    write_cases(os.path.join(out_dir, "conv2d.bin"), conv2d_cases())
    write_cases(os.path.join(out_dir, "conv3d.bin"), conv3d_cases())
    write_cases(os.path.join(out_dir, "batch_norm.bin"), bn_cases())
    write_cases(os.path.join(out_dir, "layers.bin"), layer_cases())


if __name__ == "__main__":
    main()
