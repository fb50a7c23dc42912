#!/usr/bin/python3
"""Round trip between memfmt's DLPack interop and PyTorch (torch.utils.dlpack), through ctypes.

    /usr/bin/python3 tests/interop/torch_roundtrip.py [--lib HELPER.so | --cxx g++ --include DIR]

Without --lib it compiles torch_roundtrip_helper.cpp itself. Exits 77 (CTest's skip code) when
torch is not importable: the C++ tests never need torch; this script checks what they assert
(the properties torch 1.13's from_dlpack needs) against torch itself.

Checks:
  memfmt -> torch: to_dlpack of nchw/nhwc/ncdhw/ndhwc tensors is accepted by from_dlpack, with the
    same data pointer, shape, strides, is_contiguous(memory_format) and values; the deleter runs
    (and releases memfmt's buffer) when torch drops the tensor.
  torch -> memfmt: torch.utils.dlpack.to_dlpack of contiguous / channels_last tensors is accepted
    by view_as in the dense format, with the right values, and rejected (with the message naming
    the format it is dense in) in the other.
"""
import argparse
import ctypes
import gc
import os
import subprocess
import sys
import tempfile

try:
    import torch
    import torch.utils.dlpack as tud
except ImportError:
    print("torch not available: skipped")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
FORMATS = {0: ("nchw", torch.contiguous_format), 1: ("nhwc", torch.channels_last),
           2: ("ncdhw", torch.contiguous_format), 3: ("ndhwc", torch.channels_last_3d)}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


api = ctypes.pythonapi
api.PyCapsule_New.restype = ctypes.py_object
api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_IsValid.restype = ctypes.c_int
api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]

# The destructor gets the dying capsule as a raw pointer: a py_object argument would touch its
# reference count while it is being freed.
CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_raw_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", api))
_raw_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_GetPointer", api))


@CAPSULE_DESTRUCTOR
def _capsule_destructor(capsule):
    # A capsule torch never consumed (still named "dltensor") still owns the tensor.
    if _raw_is_valid(capsule, b"dltensor"):
        m = DLManagedTensor.from_address(_raw_get_pointer(capsule, b"dltensor"))
        m.deleter(ctypes.addressof(m))


def load_helper(args):
    if args.lib:
        return ctypes.CDLL(args.lib)
    out = os.path.join(tempfile.mkdtemp(prefix="memfmt_torch_"), "helper.so")
    cmd = [args.cxx, "-std=c++17", "-O1", "-Wall", "-Wextra", "-Werror", "-fPIC", "-shared",
           "-I" + args.include, os.path.join(HERE, "torch_roundtrip_helper.cpp"), "-o", out]
    subprocess.check_call(cmd)
    return ctypes.CDLL(out)


def expected_values(sizes):
    """value_at(coord) of the helper: coordinates read as base-16 digits, outermost first."""
    v = torch.zeros(sizes, dtype=torch.float64)
    for d, s in enumerate(sizes):
        shape = [1] * len(sizes)
        shape[d] = s
        v = v + torch.arange(s, dtype=torch.float64).reshape(shape) * 16 ** (len(sizes) - 1 - d)
    return v.float()


failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def memfmt_to_torch(lib):
    err = ctypes.create_string_buffer(512)
    cases = [(0, [2, 3, 4, 5]), (1, [2, 3, 4, 5]), (1, [2, 1, 4, 5]), (1, [3, 4, 1, 1]), (1, [0, 3, 4, 5]),
             (2, [2, 3, 2, 3, 4]), (3, [2, 3, 2, 3, 4])]
    for fmt, sizes in cases:
        name, mf = FORMATS[fmt]
        arr = (ctypes.c_int64 * len(sizes))(*sizes)
        ptr = lib.memfmt_export_filled(fmt, arr, err, len(err))
        check(ptr, "export %s %s: %s" % (name, sizes, err.value))
        if not ptr:
            continue
        m = DLManagedTensor.from_address(ptr)
        data = m.dl_tensor.data
        strides = tuple(m.dl_tensor.strides[i] for i in range(len(sizes)))
        check(lib.memfmt_live_buffers() == 1, "one live buffer after export")
        capsule = api.PyCapsule_New(ptr, b"dltensor", ctypes.cast(_capsule_destructor, ctypes.c_void_p))
        t = tud.from_dlpack(capsule)
        tag = "%s %s" % (name, sizes)
        check(list(t.shape) == sizes, tag + ": shape")
        check(t.dtype == torch.float32 and t.device.type == "cpu", tag + ": dtype/device")
        if t.numel() > 0:
            check(t.data_ptr() == data, tag + ": data pointer")
            check(t.stride() == strides, tag + ": strides %s vs %s" % (t.stride(), strides))
            check(t.is_contiguous(memory_format=mf), tag + ": is_contiguous(%s)" % mf)
            check(torch.equal(t, expected_values(sizes)), tag + ": values")
        del capsule
        gc.collect()
        check(lib.memfmt_live_buffers() == 1, tag + ": torch keeps the buffer alive")
        del t
        gc.collect()
        check(lib.memfmt_live_buffers() == 0, tag + ": deleter released the buffer")
        print("memfmt -> torch ok:", tag)


def torch_to_memfmt(lib):
    err = ctypes.create_string_buffer(1024)
    cases = [([2, 3, 4, 5], torch.contiguous_format, 0, 1), ([2, 3, 4, 5], torch.channels_last, 1, 0),
             ([2, 3, 2, 3, 4], torch.contiguous_format, 2, 3), ([2, 3, 2, 3, 4], torch.channels_last_3d, 3, 2),
             ([2, 1, 4, 5], torch.contiguous_format, 1, None), ([3, 4, 1, 1], torch.channels_last, 0, None)]
    for sizes, mf, good, bad in cases:
        x = expected_values(sizes).contiguous(memory_format=mf)
        capsule = tud.to_dlpack(x)
        ptr = api.PyCapsule_GetPointer(capsule, b"dltensor")
        tag = "%s %s" % (sizes, mf)
        wrong = lib.memfmt_check_import(good, ctypes.c_void_p(ptr), err, len(err))
        check(wrong == 0, tag + " as %s: %d wrong, %s" % (FORMATS[good][0], wrong, err.value))
        if bad is not None:
            r = lib.memfmt_check_import(bad, ctypes.c_void_p(ptr), err, len(err))
            msg = err.value.decode()
            check(r == -1 and ("dense in " + FORMATS[good][0]) in msg,
                  tag + " as %s must fail naming %s: %s" % (FORMATS[bad][0], FORMATS[good][0], msg))
        print("torch -> memfmt ok:", tag)
        del capsule  # torch's own capsule destructor releases it


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib")
    ap.add_argument("--cxx", default="g++")
    ap.add_argument("--include", default=os.path.join(HERE, "..", "..", "include"))
    args = ap.parse_args()
    lib = load_helper(args)
    lib.memfmt_export_filled.restype = ctypes.c_void_p
    lib.memfmt_export_filled.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_int64), ctypes.c_char_p, ctypes.c_int]
    lib.memfmt_check_import.restype = ctypes.c_int64
    lib.memfmt_check_import.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int]
    lib.memfmt_live_buffers.restype = ctypes.c_int
    print("torch", torch.__version__)
    memfmt_to_torch(lib)
    torch_to_memfmt(lib)
    if failures:
        print("%d failure(s)" % len(failures))
        sys.exit(1)
    print("all round trips ok")


if __name__ == "__main__":
    main()
