"""The thread count of Debian's torch's matrix products, set before torch loads.

torch.set_num_threads does not reach OpenBLAS's own pthread pool (Debian's torch uses
libopenblas0-pthread): without this a "1 thread" run multiplies on both cores, which samples
per CPU-second gives away. The pool reads OPENBLAS_NUM_THREADS once, when it loads, so a script
imports this module, and calls it, before it imports torch.
"""
import os


def threads_from_argv(argv):
    """The value of --threads N (or --threads=N) in argv; "1" when absent."""
    for i, arg in enumerate(argv):
        if arg == "--threads" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--threads="):
            return arg.split("=", 1)[1]
    return "1"


def set_from_argv(argv):
    os.environ["OPENBLAS_NUM_THREADS"] = threads_from_argv(argv)
