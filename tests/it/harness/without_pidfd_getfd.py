#!/usr/bin/env python3
"""Runs a command under a seccomp filter that refuses pidfd_getfd(2) with
EPERM, as a container runtime's default profile does with every capability
dropped (the chart's `seccompProfile: RuntimeDefault`); every other call is
allowed. Installs the filter with prctl(2) through ctypes (no libseccomp),
then execs the command, which inherits it.

    without_pidfd_getfd.py PROGRAM [ARGS...]
"""
import ctypes
import os
import sys

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
EPERM = 1
# The same number on every architecture (the unified syscall table).
NR_PIDFD_GETFD = 438

BPF_LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
BPF_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
BPF_RET_K = 0x06  # BPF_RET | BPF_K
SECCOMP_DATA_NR = 0  # offsetof(struct seccomp_data, nr)


class SockFilter(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_ushort),
        ("jt", ctypes.c_ubyte),
        ("jf", ctypes.c_ubyte),
        ("k", ctypes.c_uint32),
    ]


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: without_pidfd_getfd.py PROGRAM [ARGS...]")
    program = [
        SockFilter(BPF_LD_W_ABS, 0, 0, SECCOMP_DATA_NR),
        SockFilter(BPF_JEQ_K, 0, 1, NR_PIDFD_GETFD),
        SockFilter(BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | EPERM),
        SockFilter(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
    ]
    filters = (SockFilter * len(program))(*program)
    fprog = SockFprog(len(program), filters)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        sys.exit("prctl(PR_SET_NO_NEW_PRIVS): " + os.strerror(ctypes.get_errno()))
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        sys.exit("prctl(PR_SET_SECCOMP): " + os.strerror(ctypes.get_errno()))
    os.execv(sys.argv[1], sys.argv[1:])


if __name__ == "__main__":
    main()
