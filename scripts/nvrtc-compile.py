#!/usr/bin/env python3
"""Compiles CUDA sources with NVRTC, as go-train does at run time (no options,
no CUDA headers), and prints NVRTC's log for any that fail. nvcc accepts what
NVRTC may not (its headers define more), so scripts/check-cuda-build.sh runs
both on a machine without a GPU.

    python3 scripts/nvrtc-compile.py LIBNVRTC.so FILE.cu...
"""
import ctypes
import sys


def compile_one(lib, path):
    try:
        with open(path, "rb") as f:
            source = f.read()
    except OSError as e:
        return f"{path}: cannot read it: {e.strerror}"
    prog = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), source, path.encode(), 0, None, None) != 0:
        return f"{path}: NVRTC could not create a program"
    result = lib.nvrtcCompileProgram(prog, 0, None)
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    if result != 0:
        return f"{path}: NVRTC error {result}:\n{log.value.decode(errors='replace')}"
    return None


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    try:
        lib = ctypes.CDLL(sys.argv[1])
    except OSError as e:
        sys.exit(f"{sys.argv[1]}: cannot load NVRTC: {e}")
    errors = [e for e in (compile_one(lib, p) for p in sys.argv[2:]) if e]
    for e in errors:
        print(e, file=sys.stderr)
    sys.exit(1 if errors else 0)


if __name__ == "__main__":
    main()
