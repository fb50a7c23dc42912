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


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                  "fixtures")
    os.makedirs(out_dir, exist_ok=True)
    write_cases(os.path.join(out_dir, "conv2d.bin"), conv2d_cases())
    write_cases(os.path.join(out_dir, "conv3d.bin"), conv3d_cases())
    write_cases(os.path.join(out_dir, "batch_norm.bin"), bn_cases())


if __name__ == "__main__":
    main()
