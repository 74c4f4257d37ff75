#pragma once
// ddl-bench over UCX: processes started without MPI (ddl-run, --spawn N) meet
// through DDL_RENDEZVOUS; under mpiexec they meet through an mpi_store and
// the MPI baselines run beside ddl over UCX in the same job. Only with
// DDL_BENCH_UCX.
#ifdef DDL_BENCH_UCX
#include <ddl/ucx.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hand_ring.hpp"
#include "measure.hpp"
#ifdef DDL_BENCH_MPI
#include "mpi_runner.hpp"
#endif

namespace ddl_bench {

// Whether an MPI launcher started this process (its rank variables are set).
inline bool under_mpi_launcher() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr || std::getenv("PMI_SIZE") != nullptr;
}

inline std::vector<row> run_ucx(const settings& s, std::vector<std::string>& labels, ddl::topology& topo,
                                std::string& found, ddl::plan_for& allowed) {
  std::unique_ptr<ddl::ucx_cluster> cluster;
#ifdef DDL_BENCH_MPI
  int mpi_on = 0;
  MPI_Initialized(&mpi_on);
  if (mpi_on) {
    int r = 0, n = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    ddl::mpi_store store(MPI_COMM_WORLD);
    cluster = std::make_unique<ddl::ucx_cluster>(store, r, n);
    found = "ranks met through MPI (mpi_store); ";
  }
#endif
  if (!cluster) {
    cluster = std::make_unique<ddl::ucx_cluster>();
    found = "ranks met through DDL_RENDEZVOUS; ";
  }
  auto& t = cluster->transport();
  const int n = t.size();
  found += cluster->report();
  topo = shaped(cluster->topo(), s.dims, n);
  allowed = ddl::plan_for::transport(t);
  allowed.shared_levels = ddl::shared_levels(t, topo);
  if (t.stages_shared() && n > 1) found += "; ranks share memory (stages)";
  ddl::options opts = ddl::options::from_env();
  if (s.chunk_bytes) opts.chunk_bytes = s.chunk_bytes;
  auto impls = ddl_impls(t, s, topo, opts);
  std::vector<std::string> others;
  for (const auto& b : s.baselines) {
    if (b == "ring") {
      const ring_peers peers(t.rank(), n);
      add_hand_ring(impls, found, s, t.rank(), n, [&t, peers](const std::byte* send, std::size_t sn, std::byte* recv, std::size_t rn) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        auto rq = t.irecv(peers.prev, ddl::mutable_bytes{recv, rn}, 1);
        auto sq = t.isend(peers.next, ddl::const_bytes{send, sn}, 1);
        t.wait(rq, until);
        t.wait(sq, until);
      });
    } else {
      others.push_back(b);
    }
  }
  if (!others.empty()) {
#ifdef DDL_BENCH_MPI
    if (mpi_on) {
      settings rest = s;
      rest.baselines = others;
      // MPI's ranks in ddl's order (ucx_cluster numbers them host by host),
      // kept for the baselines' lifetime.
      MPI_Comm ordered = MPI_COMM_NULL;
      MPI_Comm_split(MPI_COMM_WORLD, 0, t.rank(), &ordered);
      add_mpi_baselines(rest, ordered, t.rank(), n, impls, found);
    } else
#endif
      found += "; MPI and Gloo not compared: start ddl-bench --transport ucx under mpiexec for them";
  }
  for (const auto& i : impls) labels.push_back(i.label);
  ddl::communicator<ddl::ring, ddl::ucx_transport> meet(t);
  std::vector<row> rows = rank_sweep(t.rank(), n, s, impls, [&meet] { meet.barrier(); }, nullptr);
  // Wrong counts of every rank, summed on every rank.
  std::vector<std::int64_t> w;
  for (const auto& rw : rows)
    for (const auto& res : rw.impls) {
      w.push_back(res.wrong_oop);
      w.push_back(res.wrong_ip);
    }
  if (!w.empty()) meet.all_reduce(ddl::host_view(w), ddl::op::sum);
  std::size_t i = 0;
  for (auto& rw : rows)
    for (auto& res : rw.impls) {
      res.wrong_oop = static_cast<long>(w[i++]);
      res.wrong_ip = static_cast<long>(w[i++]);
    }
  return rows;
}

}  // namespace ddl_bench
#endif  // DDL_BENCH_UCX
