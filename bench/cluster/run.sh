#!/usr/bin/env bash
# An emulated multi-rack cluster on one machine: hosts are network
# namespaces behind per-rack bridges, links are shaped with tc htb, and
# Open MPI ranks run across them over real TCP. Runs ddl-bench with every
# ddl strategy, auto and MPI_Allreduce side by side, then tears it all down.
#
#   bench/cluster/run.sh --racks 2 --hosts-per-rack 2 --ranks-per-host 2 \
#                        --intra 1gbit --inter 200mbit [--transport mpi|ucx]
#
# --command 'PROGRAM ARGS' runs that MPI program across the hosts instead of
# ddl-bench (e.g. the UCX kill test, test/ddl_test_ucx_mpi); --env NAME=VALUE
# (repeatable) passes a setting to the ranks; --keep-going lets the survivors
# of a rank that dies run on (Open MPI's orte_enable_recovery) instead of
# mpirun ending them.
#
# --transport ucx runs ddl over UCX instead (the ranks still started by
# mpirun, meeting through an mpi_store; MPI_Allreduce beside it in the same
# job): UCX's TCP on eth0 between hosts (UCX_NET_DEVICES=eth0), shared memory
# inside one; UCX_TLS from this environment, else tcp,sm,self.
#
# Network. Every host has one NIC to its rack's bridge. Its traffic is shaped
# on the NIC (host -> switch) and on the switch port (switch -> host), each
# with two htb classes: destinations in the same rack get --intra, other
# racks get --inter (a host's share of the rack's uplink). Ranks on one host
# talk over shared memory (Open MPI's vader): the innermost level.
#
# Needs root (CAP_NET_ADMIN), iproute2, Open MPI and a ddl-bench built with
# Open MPI. Exits 77 (CTest reports a skip) when namespaces cannot be created
# or when ddl-bench links another MPI (MPICH).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

racks=2 hosts=2 ppn=2 intra=1gbit inter=200mbit
sizes_b=1M sizes_e=64M factor=4 iters=3 warmup=1
strategies=ring,multi_ring,halving_doubling,recursive_doubling,auto
topology=auto bench="" out="" limit=900 runs=1 dtype=float transport=mpi command="" keep_going=0
extra_env=()
usage() {
  cat >&2 <<EOF
usage: $0 [--racks R] [--hosts-per-rack H] [--ranks-per-host K] [--intra RATE] [--inter RATE]
          [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP] [--runs N]
          [--strategy LIST] [--topology auto|SPEC|detect] [--bench PATH] [--out DIR] [--limit SECONDS]
          [--transport mpi|ucx] [--command 'PROGRAM ARGS'] [--env NAME=VALUE]... [--keep-going]
RATE is tc's syntax (1gbit, 200mbit). --topology auto probes the emulated network
(DDL_TOPOLOGY=auto); detect uses ddl's defaults (nodes from shared memory only);
anything else is passed as DDL_TOPOLOGY. Each run writes DIR/run-K.txt.
DDL_PIPELINE_DEPTH and DDL_CHUNK_BYTES, when set, are passed to the ranks
(unset: the library's defaults).
EOF
  exit 2
}
while (($#)); do
  case $1 in
    --racks) racks=$2; shift ;;
    --hosts-per-rack) hosts=$2; shift ;;
    --ranks-per-host) ppn=$2; shift ;;
    --intra) intra=$2; shift ;;
    --inter) inter=$2; shift ;;
    -b) sizes_b=$2; shift ;;
    -e) sizes_e=$2; shift ;;
    -f) factor=$2; shift ;;
    -n) iters=$2; shift ;;
    -w) warmup=$2; shift ;;
    -d) dtype=$2; shift ;;
    --runs) runs=$2; shift ;;
    --strategy) strategies=$2; shift ;;
    --topology) topology=$2; shift ;;
    --bench) bench=$2; shift ;;
    --out) out=$2; shift ;;
    --limit) limit=$2; shift ;;
    --transport) transport=$2; shift ;;
    --command) command=$2; shift ;;
    --env) [[ $2 == *=* ]] || { echo "run.sh: --env takes NAME=VALUE" >&2; exit 2; }; extra_env+=(-x "$2"); shift ;;
    --keep-going) keep_going=1 ;;
    -h|--help) usage ;;
    *) echo "run.sh: unknown argument '$1'" >&2; usage ;;
  esac
  shift
done
[[ $transport == mpi || $transport == ucx ]] || { echo "run.sh: --transport must be mpi or ucx" >&2; exit 2; }
for v in racks hosts ppn runs; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --$v must be a positive integer" >&2; exit 2; }
done
((racks <= 8 && hosts <= 16)) || { echo "run.sh: at most 8 racks of 16 hosts" >&2; exit 2; }

# --- preflight ----------------------------------------------------------------
skip() { echo "run.sh: SKIP: $*" >&2; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (CAP_NET_ADMIN) to create network namespaces"
command -v ip >/dev/null || skip "iproute2 ('ip') is not installed"
command -v tc >/dev/null || skip "tc (iproute2) is not installed"
command -v mpirun >/dev/null || { echo "run.sh: mpirun not found (apt install openmpi-bin)" >&2; exit 1; }
probe_ns="ddlprobe$$"
ip netns add "$probe_ns" 2>/dev/null || skip "cannot create network namespaces here (ip netns add failed)"
probe_ok=1
ip -n "$probe_ns" link add pa type veth peer name pb 2>/dev/null &&
  ip netns exec "$probe_ns" tc qdisc add dev pa root handle 1: htb default 10 2>/dev/null || probe_ok=0
ip netns exec "$probe_ns" unshare --uts true 2>/dev/null || probe_ok=2
ip netns del "$probe_ns"
((probe_ok == 1)) || skip "$( ((probe_ok == 0)) && echo "veth or tc htb unavailable in this kernel" || echo "cannot create UTS namespaces (unshare --uts)")"
bench=${bench:-$root/build/release/bench/ddl-bench}
if [ -n "$command" ]; then
  read -r -a program <<<"$command"
  bench=${program[0]}
else
  program=("$bench" --transport "$transport" --strategy "$strategies" --baseline mpi
           -b "$sizes_b" -e "$sizes_e" -f "$factor" -n "$iters" -w "$warmup" -d "$dtype")
fi
[ -x "$bench" ] || { echo "run.sh: $bench not found; build first (./quickstart.sh demo) or pass --bench" >&2; exit 1; }
# The ranks are launched by Open MPI's mpirun across the namespaces; a
# ddl-bench linked with another MPI would start as n singletons of one rank.
libs=$(ldd "$bench" 2>/dev/null || true)
if grep -q -E 'libmpi\.so\.[0-9]' <<<"$libs"; then :
elif other=$(grep -o -E 'lib(mpich|mpi[a-z_]*)\.so[.0-9]*' <<<"$libs" | head -n 1) && [ -n "$other" ]; then
  skip "$bench links $other, not Open MPI's libmpi; the emulation launches with Open MPI's mpirun"
else
  echo "run.sh: $bench links no MPI library; build it with -DDDL_ENABLE_MPI=ON" >&2; exit 1
fi

# --- the emulated network -----------------------------------------------------
P="ddl$$"                       # every name this run creates starts with it
work=$(mktemp -d "/tmp/ddl-cluster.XXXXXX")
net=10.213                      # host (r, h) = 10.213.(r+1).(h+1); head = 10.213.0.254
sw="${P}sw" head="${P}hd"
hopt="burst 64k cburst 64k quantum 60000"   # default htb burst undershoots 1gbit by ~10%
created=()

teardown() {
  local rc=$?
  set +e
  pkill -KILL -f "$work/" 2>/dev/null
  for ns in "${created[@]}"; do ip netns del "$ns" 2>/dev/null; done
  rm -rf "$work"
  exit $rc
}
trap teardown EXIT INT TERM

host_ns() { echo "${P}r$1h$2"; }
host_ip() { echo "$net.$(($1 + 1)).$(($2 + 1))"; }

add_ns() { ip netns add "$1"; created+=("$1"); ip -n "$1" link set lo up; }

# shape NS DEV MATCH(dst|src) RACK: same rack -> intra, anything else -> inter
shape() {
  local ns=$1 dev=$2 dir=$3 r=$4
  ip netns exec "$ns" tc qdisc add dev "$dev" root handle 1: htb default 20
  ip netns exec "$ns" tc class add dev "$dev" parent 1: classid 1:10 htb rate "$intra" ceil "$intra" $hopt
  ip netns exec "$ns" tc class add dev "$dev" parent 1: classid 1:20 htb rate "$inter" ceil "$inter" $hopt
  ip netns exec "$ns" tc filter add dev "$dev" parent 1: protocol ip prio 1 u32 \
    match ip "$dir" "$net.$((r + 1)).0/24" flowid 1:10
}

t0=$(date +%s.%N)
add_ns "$sw"
ip -n "$sw" link add core type bridge stp_state 0 forward_delay 0
ip -n "$sw" link set core up
for ((r = 0; r < racks; r++)); do
  ip -n "$sw" link add "br$r" type bridge stp_state 0 forward_delay 0
  ip -n "$sw" link set "br$r" up
  ip -n "$sw" link add "up$r" type veth peer name "dn$r"   # rack uplink (unshaped: classes are per host)
  ip -n "$sw" link set "up$r" master "br$r" up
  ip -n "$sw" link set "dn$r" master core up
done
attach() {  # ns ip bridge port
  ip link add "$4" netns "$sw" type veth peer name eth0 netns "$1"
  ip -n "$1" addr add "$2/16" dev eth0
  ip -n "$1" link set eth0 up
  ip -n "$sw" link set "$4" master "$3" up
}
add_ns "$head"
attach "$head" "$net.0.254" core phd
: >"$work/hostfile"
cat >"$work/nsexec" <<EOF
#!/bin/sh
# Open MPI launch agent: "nsexec HOST CMD..." runs CMD inside HOST's namespace
host=\$1; shift
ns=\$(awk -v h="\$host" '\$1 == h { print \$2 }' "$work/hosts")
[ -n "\$ns" ] || { echo "nsexec: unknown host \$host" >&2; exit 255; }
mkdir -p "$work/tmp/\$ns"
export TMPDIR="$work/tmp/\$ns"
# its own hostname too: Open MPI names shared-memory segments after it
exec ip netns exec "\$ns" unshare --uts /bin/sh -c "hostname \$ns; \$*"
EOF
chmod +x "$work/nsexec"
for ((r = 0; r < racks; r++)); do
  for ((h = 0; h < hosts; h++)); do
    ns=$(host_ns $r $h) ipa=$(host_ip $r $h)
    add_ns "$ns"
    attach "$ns" "$ipa" "br$r" "p${r}_$h"
    shape "$ns" eth0 dst $r          # host -> switch, by destination
    shape "$sw" "p${r}_$h" src $r    # switch -> host, by source
    echo "$ipa $ns" >>"$work/hosts"
    echo "$ipa slots=$ppn" >>"$work/hostfile"
  done
done
t1=$(date +%s.%N)
n=$((racks * hosts * ppn))
echo "# emulated cluster: $racks rack(s) x $hosts host(s) x $ppn rank(s) = $n ranks; intra-rack $intra, inter-rack $inter per host (htb); set up in $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}') s"

env_topo=()
case $topology in
  auto) env_topo=(-x DDL_TOPOLOGY=auto) ;;
  detect) ;;
  *) env_topo=(-x "DDL_TOPOLOGY=$topology") ;;
esac
# ddl settings in this environment travel to the ranks. (Until 2026-11-28
# this script set DDL_PIPELINE_DEPTH=16: 1 MiB chunks over TCP stalled on
# their rendezvous with few in flight. Messages between machines now go in
# pieces below TCP's eager limit, and the library's depth of 4 runs as fast:
# bench/results/cluster-emulation.md, fifth round.)
for v in DDL_PIPELINE_DEPTH DDL_CHUNK_BYTES; do [ -n "${!v:-}" ] && env_topo+=(-x "$v=${!v}"); done
[ "$transport" = ucx ] && env_topo+=(-x "UCX_TLS=${UCX_TLS:-tcp,sm,self}" -x UCX_NET_DEVICES=eth0)
env_topo+=("${extra_env[@]}")
recovery=()
((keep_going)) && recovery=(--mca orte_enable_recovery 1 --mca orte_abort_on_non_zero_status 0)
mkdir -p "$work/tmp/head"
[ -n "$out" ] && mkdir -p "$out"
for ((k = 1; k <= runs; k++)); do
  log="$work/run-$k.txt"
  echo "# run $k/$runs: $(date -u +%FT%TZ)"
  settings="# run.sh: $racks x $hosts x $ppn, intra $intra, inter $inter, transport $transport; DDL_PIPELINE_DEPTH=${DDL_PIPELINE_DEPTH:-default}${DDL_CHUNK_BYTES:+ DDL_CHUNK_BYTES=$DDL_CHUNK_BYTES}"
  TMPDIR="$work/tmp/head" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    timeout --kill-after=10 "$limit" ip netns exec "$head" mpirun --allow-run-as-root \
    --hostfile "$work/hostfile" -np "$n" --map-by slot --oversubscribe \
    --mca plm_rsh_agent "$work/nsexec" --mca plm_rsh_no_tree_spawn 1 \
    --mca pml ob1 --mca btl vader,tcp,self --mca mpi_yield_when_idle 1 "${recovery[@]}" \
    --mca btl_tcp_if_include "$net.0.0/16" --mca oob_tcp_if_include "$net.0.0/16" \
    "${env_topo[@]}" -x DDL_TIMEOUT=300 \
    "${program[@]}" 2>&1 | { echo "$settings"; cat; } | tee "$log"
  rc=${PIPESTATUS[0]}
  [ -n "$out" ] && cp "$log" "$out/run-$k.txt"
  ((rc == 0)) || { echo "run.sh: run $k failed (exit $rc)" >&2; exit "$rc"; }
done
