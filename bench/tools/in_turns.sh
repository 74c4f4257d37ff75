# Sourced, from the repository root, by the old-against-new scripts under bench/results:
#   in_turns ROUNDS OLD NEW STEP [OLD_NAME NEW_NAME]
# runs `STEP old OLD r`, then `STEP new NEW r` (the names: old and new unless given), for r = 1 ..
# ROUNDS: the two builds alternate, each run a fresh set of processes, because this project's VM
# places its two vCPUs anew between processes and both builds must meet the same placements
# (bench/results/mpi-vs-openmpi-mpich-gloo.md, 2026-12-04 (night)).
#   ompi_tuned N ARGS...  runs `mpirun -n N ARGS...` as the recorded Open MPI runs do (as root,
# oversubscribed ranks yielding, glibc's malloc tuned).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
in_turns() {
  local rounds=$1 old=$2 new=$3 step=$4 old_name=${5:-old} new_name=${6:-new} r
  for r in $(seq "$rounds"); do
    "$step" "$old_name" "$old" "$r"
    "$step" "$new_name" "$new" "$r"
  done
}
ompi_tuned() {
  local n=$1
  shift
  mpirun -n "$n" --oversubscribe --mca mpi_yield_when_idle 1 \
    -x GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=17179869184 "$@"
}
