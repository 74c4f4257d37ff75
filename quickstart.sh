#!/usr/bin/env bash
# Quick start on a fresh Debian 12 machine:
#   ./quickstart.sh demo   install what is missing, build what the demo runs, run ddl-bench (in-process
#                          ranks, then processes over UCX started without mpiexec) and a short
#                          data-parallel training run (in-process ranks); ranks: one a core, at least
#                          2 (DDL_RANKS=N overrides)
#   ./quickstart.sh test   install what is missing, build, run the whole test suite (CTest), the
#                          MPI tests once more under MPICH, ddl-bench's oneCCL rows (PyPI's oneCCL),
#                          and the torch tests against PyPI's torch 2.x
set -euo pipefail
cd "$(dirname "$0")"

mode=${1:-}
case "$mode" in demo|test) ;; *) echo "usage: $0 demo|test" >&2; exit 2 ;; esac

# Debian packages the build and tests need (only the missing ones are installed).
packages=(cmake ninja-build g++ make python3 doctest-dev openmpi-bin libopenmpi-dev libucx-dev ucx-utils iproute2 zlib1g-dev dataset-fashion-mnist)
# The test run also builds and tests the LibTorch example and the PyTorch backend, runs the
# MPI tests a second time under MPICH (Open MPI stays the default MPI), builds a user's
# project once more with Clang (strict warnings), and runs the simulator's fibers under Valgrind.
# It also builds the PyTorch backend against PyPI's torch 2.x in a virtual environment
# (python3-venv; DDL_TORCH2=0 leaves that out), and the API reference with Doxygen; ddl-bench's
# baselines: Gloo (libgloo-dev) and oneCCL (PyPI, in a virtual environment; DDL_ONECCL=0 leaves it out).
if [ "$mode" = test ]; then packages+=(libtorch-dev python3-torch python3-dev python3-venv pkg-config pybind11-dev mpich libmpich-dev clang valgrind doxygen libgloo-dev); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "== installing: ${missing[*]}"
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

build=${DDL_BUILD_DIR:-build/release}
jobs=$(nproc 2>/dev/null || echo 2)
# Ninja schedules every object file on its own; Make builds a target's objects
# only after the targets it depends on (doctest's main, the sanitizers' object
# libraries, the benchmark's commit stamp), which left ddl_bench.cpp (100 s)
# compiling alone at the end (.ci/compile_times.sh). A build directory
# configured before keeps its generator.
generator() { [ -f "$1/CMakeCache.txt" ] || echo "-GNinja"; }
echo "== configuring and building in $build"
cmake -S . -B "$build" $(generator "$build") -DCMAKE_BUILD_TYPE=Release -DDDL_WARNINGS_AS_ERRORS=ON >/dev/null

if [ "$mode" = demo ]; then
  cmake --build "$build" -j "$jobs" --target ddl-bench ddl-train
  ranks=${DDL_RANKS:-$((jobs > 2 ? jobs : 2))}  # one rank a core: more only time-share the cores
  echo "== ddl-bench: all-reduce over $ranks in-process ranks, 4 KiB .. 64 MiB: the ring, and auto (the planner's pick, named in the plan column)"
  "$build/bench/ddl-bench" --ranks "$ranks" -b 4K -e 64M -f 4 -n 10 -w 2 --strategy ring,auto
  echo "== ddl-bench over UCX: $ranks processes started without mpiexec (--spawn, as ddl-run -n $ranks), meeting through a rendezvous directory"
  "$build/bench/ddl-bench" --transport ucx --spawn "$ranks" -b 4K -e 16M -f 4 -n 10 -w 2 --strategy ring,auto 2>&1 | grep -v 'UCX  WARN'
  echo "== ddl-train: an MLP on Fashion-MNIST, $ranks in-process ranks, gradients averaged through ddl's buckets"
  echo "   (exposed communication: the time a rank waited for gradient all-reduces that its backward pass did not hide)"
  "$build/examples/ddl-train" --model mlp --ranks "$ranks" --epochs 2
else
  cmake --build "$build" -j "$jobs"
  # The API reference from the headers' comments; Doxygen warns on every undocumented public name.
  cmake --build "$build" --target docs
  echo "== API reference: $build/docs/html/index.html, $(wc -l < "$build/docs/doxygen-warnings.txt") Doxygen warning(s) in $build/docs/doxygen-warnings.txt"
  echo "== running the test suite"
  ctest --test-dir "$build" --output-on-failure --timeout 900 -j 2
  # "MPI, any implementation": the same MPI tests, built against and run under MPICH, at 1 to 5
  # ranks (MPICH's waiting ranks spin: 8 of them on a 2-core machine take over a minute; mpi.n8
  # runs under Open MPI above).
  mpich_build=${DDL_MPICH_BUILD_DIR:-build/mpich}
  echo "== the MPI tests under MPICH, in $mpich_build"
  cmake -S . -B "$mpich_build" $(generator "$mpich_build") -DCMAKE_BUILD_TYPE=Release -DDDL_WARNINGS_AS_ERRORS=ON -DDDL_BUILD_TORCH=OFF \
    -DMPI_CXX_COMPILER=mpicxx.mpich -DMPIEXEC_EXECUTABLE=/usr/bin/mpiexec.mpich >/dev/null
  cmake --build "$mpich_build" -j "$jobs" --target ddl_test_mpi
  ctest --test-dir "$mpich_build" -R '^mpi' -E '^mpi\.asan|^mpi\.(stall\.)?n8$' --output-on-failure --timeout 600 -j 2
  # Side by side with Intel's oneCCL (bench/results/oneccl.md): PyPI's oneccl-cpu-devel and Intel
  # MPI (impi-devel, its transport, ABI-compatible with MPICH) in a virtual environment under the
  # build folder; ddl-bench built against that MPI with the oneCCL baseline, its rows checked.
  if [ "${DDL_ONECCL:-1}" != 0 ]; then
    venv=${DDL_ONECCL_VENV:-build/venv-oneccl}
    oneccl_build=${DDL_ONECCL_BUILD_DIR:-build/oneccl}
    echo "== ddl-bench beside oneCCL (PyPI's oneccl-cpu 2022.2.0, Intel MPI; $venv), in $oneccl_build"
    [ -x "$venv/bin/python3" ] || /usr/bin/python3 -m venv "$venv"
    [ -f "$venv/include/oneapi/ccl.hpp" ] || "$venv/bin/pip" install -q --no-deps oneccl-cpu==2022.2.0 \
      oneccl-cpu-devel==2022.2.0 impi-rt==2021.19.0 impi-devel==2021.19.0 intel-cmplr-lib-rt==2026.2.0
    ln -sf libccl.so.1.0 "$venv/lib/libccl.so.2"  # libccl.so asks for libccl.so.2; the wheel names it .so.1.0
    # Intel MPI's compiler wrappers find their folder through I_MPI_ROOT.
    I_MPI_ROOT="$PWD/$venv" cmake -S . -B "$oneccl_build" $(generator "$oneccl_build") -DCMAKE_BUILD_TYPE=Release \
      -DDDL_WARNINGS_AS_ERRORS=ON -DDDL_BUILD_TORCH=OFF -DDDL_BUILD_EXAMPLES=OFF -DDDL_ENABLE_CUDA=OFF \
      -DMPI_CXX_COMPILER="$PWD/$venv/bin/mpicxx" -DMPIEXEC_EXECUTABLE="$PWD/$venv/bin/mpiexec" \
      -DDDL_ONECCL_ROOT="$PWD/$venv" >/dev/null
    I_MPI_ROOT="$PWD/$venv" cmake --build "$oneccl_build" -j "$jobs" --target ddl-bench
    ctest --test-dir "$oneccl_build" -R '^bench\.oneccl\.' --output-on-failure --timeout 300
  fi
  # Today's PyTorch: the backend built against PyPI's torch (pinned; 5.4 GB with its CUDA
  # wheels, ~2.5 min to install, runs on CPU) in a virtual environment under the build
  # folder, and every torch test run with it.
  if [ "${DDL_TORCH2:-1}" != 0 ]; then
    torch2=2.15.0
    venv=${DDL_TORCH2_VENV:-build/venv-torch2}
    torch2_build=${DDL_TORCH2_BUILD_DIR:-build/torch2}
    echo "== the torch backend against PyPI's torch $torch2 ($venv), in $torch2_build"
    [ -x "$venv/bin/python3" ] || /usr/bin/python3 -m venv "$venv"
    "$venv/bin/python3" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$torch2')" 2>/dev/null ||
      "$venv/bin/pip" install -q "torch==$torch2" "pybind11==3.1.0" numpy
    cmake -S . -B "$torch2_build" $(generator "$torch2_build") -DCMAKE_BUILD_TYPE=Release -DDDL_WARNINGS_AS_ERRORS=ON \
      -DDDL_BUILD_EXAMPLES=OFF -DDDL_BUILD_BENCH=OFF -DPython_EXECUTABLE="$PWD/$venv/bin/python3" >/dev/null
    cmake --build "$torch2_build" -j "$jobs" --target ddl_torch_C ddl-run
    ctest --test-dir "$torch2_build" -R '^torch\.' --output-on-failure --timeout 600
  fi
fi
