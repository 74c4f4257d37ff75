"""Builds ddl_torch against the torch of the Python that runs pip:

    pip install --no-build-isolation ./integrations/torch
    python -c "import ddl_torch"            # registers the backend "ddl"

(--no-build-isolation: the extension must be built against the torch it will
run with, not a fresh one pip would fetch.) torch.utils.cpp_extension does the
compiling: C++20 for torch 2.x (its headers need it), C++17 for 1.x. The
transports come from what this machine has: UCX (pkg-config ucx, Debian's
libucx-dev) and MPI (Open MPI's or MPICH's mpicxx); at least one is needed.
"""
import os
import re
import shlex
import subprocess

import torch
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.normpath(os.path.join(here, "..", ".."))


def output(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def flags(text):
    """Include dirs, library dirs, libraries and other link flags of a compiler line."""
    inc, ldir, libs, other = [], [], [], []
    for f in shlex.split(text or ""):
        if f.startswith("-I"):
            inc.append(f[2:])
        elif f.startswith("-L"):
            ldir.append(f[2:])
        elif f.startswith("-l"):
            libs.append(f[2:])
        elif f.startswith("-Wl,"):
            other.append(f)
    return inc, ldir, libs, other


include_dirs, library_dirs, libraries, link_args, macros = [os.path.join(root, "include")], [], [], [], []
ucx = output(["pkg-config", "--cflags", "--libs", "ucx"])
if ucx is not None:
    i, d, l, o = flags(ucx)
    include_dirs += i
    library_dirs += d
    libraries += [x for x in l if x in ("ucp", "ucs")] or ["ucp", "ucs"]
    macros.append(("DDL_TORCH_UCX", None))
mpi = output(["mpicxx", "--showme:compile"])  # Open MPI
if mpi is not None:
    mpi += " " + (output(["mpicxx", "--showme:link"]) or "")
else:  # MPICH: "g++ -I... -L... -lmpichcxx -lmpich"
    mpi = output(["mpicxx", "-compile_info"])
    mpi = mpi.split(None, 1)[1] if mpi else None
if mpi is not None:
    i, d, l, o = flags(mpi)
    include_dirs += i
    library_dirs += d
    libraries += l
    link_args += o
    macros.append(("DDL_TORCH_MPI", None))
if not macros:
    raise SystemExit("ddl_torch needs UCX (apt install libucx-dev pkg-config) or MPI (apt install libopenmpi-dev)")

major = int(torch.__version__.split(".")[0])
version = re.search(r"project\(ddl VERSION ([0-9.]+)", open(os.path.join(root, "CMakeLists.txt")).read()).group(1)
setup(
    name="ddl_torch",
    version=version,
    description="ddl's collectives as a torch.distributed backend",
    packages=["ddl_torch"],
    ext_modules=[
        CppExtension(
            "ddl_torch._C",
            [os.path.join("src", "module.cpp")],
            include_dirs=include_dirs,
            library_dirs=library_dirs,
            libraries=libraries,
            define_macros=macros,
            extra_compile_args=["-std=c++20" if major >= 2 else "-std=c++17", "-O2"],
            extra_link_args=link_args + [f"-Wl,-rpath,{d}" for d in library_dirs],
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
