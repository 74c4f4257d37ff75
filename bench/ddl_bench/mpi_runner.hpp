#pragma once
// ddl-bench over MPI: the ranks' sweep with the MPI call doing the same job
// (and Gloo's all-reduce, oneCCL's collectives, and the hand-written ring on
// MPI_Sendrecv) as extra rows. Only with DDL_BENCH_MPI.
#ifdef DDL_BENCH_MPI
#include <ddl/mpi.hpp>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#ifdef DDL_BENCH_GLOO
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#endif

#include "hand_ring.hpp"
#include "measure.hpp"
#include "oneccl_baseline.hpp"

namespace ddl_bench {

inline MPI_Datatype mpi_type(ddl::dtype t) {
  switch (t) {
    case ddl::dtype::int32: return MPI_INT32_T;
    case ddl::dtype::int64: return MPI_INT64_T;
    case ddl::dtype::float32: return MPI_FLOAT;
    case ddl::dtype::float64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;
  }
}
inline MPI_Op mpi_op(ddl::op o) {
  switch (o) {
    case ddl::op::sum: return MPI_SUM;
    case ddl::op::prod: return MPI_PROD;
    case ddl::op::min: return MPI_MIN;
    case ddl::op::max: return MPI_MAX;
    default: return MPI_OP_NULL;
  }
}

#ifdef DDL_BENCH_GLOO
template <class T>
const gloo::ReductionFunction<T>* gloo_fn(ddl::op o) {
  switch (o) {
    case ddl::op::prod: return gloo::ReductionFunction<T>::product;
    case ddl::op::min: return gloo::ReductionFunction<T>::min;
    case ddl::op::max: return gloo::ReductionFunction<T>::max;
    default: return gloo::ReductionFunction<T>::sum;
  }
}

// Gloo over TCP on loopback, rendezvous through a file store every rank sees.
struct gloo_baseline {
  std::shared_ptr<gloo::rendezvous::Context> context;
  std::string dir;

  gloo_baseline(MPI_Comm comm) {
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    char path[256] = "";
    if (rank == 0) {
      std::snprintf(path, sizeof path, "/tmp/ddl-bench-gloo-XXXXXX");
      if (!mkdtemp(path)) throw std::runtime_error("mkdtemp failed");
    }
    MPI_Bcast(path, sizeof path, MPI_CHAR, 0, comm);
    dir = path;
    gloo::rendezvous::FileStore store(dir);
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->connectFullMesh(store, dev);
    MPI_Barrier(comm);
    if (rank == 0) std::system(("rm -rf " + dir).c_str());
  }

  template <template <class> class Algo>
  impl make(const std::string& label, const settings& s) {
    impl m;
    m.label = label;
    auto algo = std::make_shared<std::shared_ptr<gloo::Algorithm>>();
    auto ctx = context;
    const ddl::dtype dt = s.type;
    const ddl::op op = s.oper;
    m.prepare = [algo, ctx, dt, op](std::byte* buf, std::size_t count) {
      algo->reset();
      ddl::visit_dtype(dt, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, std::int64_t> ||
                      std::is_same_v<T, std::int32_t>) {
          using G = std::conditional_t<std::is_same_v<T, std::int32_t>, int, T>;
          *algo = std::make_shared<Algo<G>>(ctx, std::vector<G*>{reinterpret_cast<G*>(buf)}, static_cast<int>(count),
                                            gloo_fn<G>(op));
        }
      });
    };
    m.ip = [algo](std::byte*, std::size_t) { (*algo)->run(); };
    return m;
  }
};
#endif

// The baselines of `s` over MPI communicator `comm` (this process is rank
// `rank` of `n`): the MPI call doing each collective's job, the hand-written
// ring on MPI_Sendrecv, Gloo's all-reduce. Also used beside ddl over UCX in
// an MPI job (`run_ucx`).
inline void add_mpi_baselines(const settings& s, MPI_Comm comm, int rank, int n, std::vector<impl>& impls,
                              std::string& found) {
  for (const auto& b : s.baselines) {
    if (b == "mpi") {
      const MPI_Datatype dt = mpi_type(s.type);
      const MPI_Op op = mpi_op(s.oper);
      const bool reduces = s.coll == collective::all_reduce || s.coll == collective::reduce_scatter;
      if (dt == MPI_DATATYPE_NULL || (reduces && op == MPI_OP_NULL)) {
        found += std::string("; MPI not compared: MPI has no ") +
                 (dt == MPI_DATATYPE_NULL ? "datatype for " + std::string(ddl::name_of(s.type)) : "avg op");
        continue;
      }
      const std::size_t es = ddl::size_of(s.type);
      impl m;
      switch (s.coll) {
        case collective::all_reduce:
          m.label = "MPI_Allreduce";
          m.oop = [=](const std::byte* in, std::byte* out, std::size_t c) {
            MPI_Allreduce(in, out, static_cast<int>(c), dt, op, comm);
          };
          m.ip = [=](std::byte* buf, std::size_t c) { MPI_Allreduce(MPI_IN_PLACE, buf, static_cast<int>(c), dt, op, comm); };
          break;
        case collective::reduce_scatter:
          m.label = "MPI_Reduce_scatter_block";
          m.oop = [=](const std::byte* in, std::byte* out, std::size_t c) {
            MPI_Reduce_scatter_block(in, out, static_cast<int>(c / n), dt, op, comm);
          };
          m.ip = [=](std::byte* buf, std::size_t c) {
            MPI_Reduce_scatter_block(MPI_IN_PLACE, buf, static_cast<int>(c / n), dt, op, comm);
          };
          m.ip_block_at_own_offset = false;  // MPI_IN_PLACE leaves the block at the start
          break;
        case collective::all_gather: {
          const int r = rank;
          m.label = "MPI_Allgather";
          m.oop = [=](const std::byte* in, std::byte* out, std::size_t c) {
            const int k = static_cast<int>(c / n);
            MPI_Allgather(in + static_cast<std::size_t>(r) * (c / n) * es, k, dt, out, k, dt, comm);
          };
          m.ip = [=](std::byte* buf, std::size_t c) {
            MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, static_cast<int>(c / n), dt, comm);
          };
          break;
        }
        case collective::broadcast:
          m.label = "MPI_Bcast";
          m.ip = [=](std::byte* buf, std::size_t c) { MPI_Bcast(buf, static_cast<int>(c), dt, 0, comm); };
          break;
        case collective::all_to_all:
          m.label = "MPI_Alltoall";
          m.oop = [=](const std::byte* in, std::byte* out, std::size_t c) {
            const int k = static_cast<int>(c / n);
            MPI_Alltoall(in, k, dt, out, k, dt, comm);
          };
          m.ip = [=](std::byte* buf, std::size_t c) {
            MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, static_cast<int>(c / n), dt, comm);
          };
          break;
        case collective::gather: {  // root 0, the blocks as ddl-bench's ddl rows place them
          const int r = rank;
          m.label = "MPI_Gather";
          m.oop = [=](const std::byte* in, std::byte* out, std::size_t c) {
            const int k = static_cast<int>(c / n);
            MPI_Gather(in + static_cast<std::size_t>(r) * (c / n) * es, k, dt, out, k, dt, 0, comm);
          };
          m.ip = [=](std::byte* buf, std::size_t c) {
            const int k = static_cast<int>(c / n);
            if (r == 0) MPI_Gather(MPI_IN_PLACE, k, dt, buf, k, dt, 0, comm);
            else MPI_Gather(buf + static_cast<std::size_t>(r) * (c / n) * es, k, dt, nullptr, k, dt, 0, comm);
          };
          break;
        }
        case collective::reduce: {  // root 0
          const int r = rank;
          m.label = "MPI_Reduce";
          m.oop = [=](const std::byte* in, std::byte* out, std::size_t c) {
            MPI_Reduce(in, out, static_cast<int>(c), dt, op, 0, comm);
          };
          m.ip = [=](std::byte* buf, std::size_t c) {
            if (r == 0) MPI_Reduce(MPI_IN_PLACE, buf, static_cast<int>(c), dt, op, 0, comm);
            else MPI_Reduce(buf, nullptr, static_cast<int>(c), dt, op, 0, comm);
          };
          break;
        }
        case collective::sendrecv: {  // the ring shift ddl-bench's ddl row runs
          const ring_peers peers(rank, n);
          const int next = peers.next, prev = peers.prev;
          m.label = "MPI_Sendrecv";
          m.oop = [=](const std::byte* in, std::byte* out, std::size_t c) {
            MPI_Sendrecv(in, static_cast<int>(c), dt, next, 0, out, static_cast<int>(c), dt, prev, 0, comm,
                         MPI_STATUS_IGNORE);
          };
          m.ip = [=](std::byte* buf, std::size_t c) {
            MPI_Sendrecv_replace(buf, static_cast<int>(c), dt, next, 0, prev, 0, comm, MPI_STATUS_IGNORE);
          };
          break;
        }
        case collective::scatter: {
          const int r = rank;
          m.label = "MPI_Scatter";
          m.oop = [=](const std::byte* in, std::byte* out, std::size_t c) {
            const int k = static_cast<int>(c / n);
            MPI_Scatter(in, k, dt, out, k, dt, 0, comm);
          };
          m.ip = [=](std::byte* buf, std::size_t c) {
            const int k = static_cast<int>(c / n);
            if (r == 0) MPI_Scatter(buf, k, dt, MPI_IN_PLACE, k, dt, 0, comm);
            else MPI_Scatter(nullptr, k, dt, buf + static_cast<std::size_t>(r) * (c / n) * es, k, dt, 0, comm);
          };
          break;
        }
      }
      impls.push_back(std::move(m));
    } else if (b == "ring") {
      const ring_peers peers(rank, n);
      auto exchange = [comm, peers](const std::byte* send, std::size_t sn, std::byte* recv, std::size_t rn) {
        MPI_Sendrecv(send, static_cast<int>(sn), MPI_BYTE, peers.next, 0, recv, static_cast<int>(rn), MPI_BYTE,
                     peers.prev, 0, comm, MPI_STATUS_IGNORE);
      };
      add_hand_ring(impls, found, s, rank, n, exchange);
    } else if (b == "oneccl") {
#ifdef DDL_BENCH_ONECCL
      static oneccl_baseline c(comm);
      c.add(s, impls, found);
#else
      found += "; oneCCL not compared: ddl-bench was built without it (DDL_ONECCL_ROOT; docs/benchmarks.md)";
#endif
    } else {
      if (s.coll != collective::all_reduce) {
        found += "; gloo not compared: all_reduce only";
        continue;
      }
#ifdef DDL_BENCH_GLOO
      if (s.oper == ddl::op::avg || s.type == ddl::dtype::float16 || s.type == ddl::dtype::bfloat16) {
        found += "; gloo not compared for this dtype/op";
        continue;
      }
      static gloo_baseline g(comm);
      impls.push_back(g.make<gloo::AllreduceRingChunked>("gloo:ring_chunked", s));
      impls.push_back(g.make<gloo::AllreduceHalvingDoubling>("gloo:halving_doubl", s));
#else
      found += "; gloo not compared: ddl-bench was built without Gloo (install libgloo-dev and reconfigure)";
#endif
    }
  }
}

inline std::vector<row> run_mpi(const settings& s, std::vector<std::string>& labels, ddl::topology& topo, std::string& found,
                                ddl::plan_for& allowed) {
  ddl::mpi_cluster cluster(MPI_COMM_WORLD);
  auto& t = cluster.transport();
  found = cluster.report();
  allowed = ddl::plan_for::transport(t);
  if (t.stages_shared() && t.size() > 1) found += "; ranks share memory (stages)";
  topo = shaped(cluster.topo(), s.dims, t.size());
  allowed.shared_levels = ddl::shared_levels(t, topo);
  if (!t.stages_shared() && allowed.shared_levels > 0)
    found += "; ranks share memory (stages) inside the first " + std::to_string(allowed.shared_levels) + " level(s)";
  ddl::options opts = ddl::options::from_env();
  if (s.chunk_bytes) opts.chunk_bytes = s.chunk_bytes;
  auto impls = ddl_impls(t, s, topo, opts);
  add_mpi_baselines(s, t.comm(), t.rank(), t.size(), impls, found);
  const MPI_Comm comm = t.comm();
  for (const auto& i : impls) labels.push_back(i.label);
  // The timing barrier yields while it waits: MPICH's MPI_Barrier busy-polls,
  // and on oversubscribed cores every timed iteration then lasts whole
  // scheduler ticks (4 ms here, even around a memcpy).
  auto quiet_barrier = [comm] {
    MPI_Request req;
    MPI_Ibarrier(comm, &req);
    for (int done = 0;;) {
      MPI_Test(&req, &done, MPI_STATUS_IGNORE);
      if (done) break;
      std::this_thread::yield();
    }
  };
  std::vector<row> rows = rank_sweep(t.rank(), t.size(), s, impls, quiet_barrier, nullptr);
  // Wrong counts of every rank, summed on rank 0.
  std::vector<long> w;
  for (const auto& rw : rows)
    for (const auto& res : rw.impls) {
      w.push_back(res.wrong_oop);
      w.push_back(res.wrong_ip);
    }
  std::vector<long> total(w.size());
  MPI_Reduce(w.data(), total.data(), static_cast<int>(w.size()), MPI_LONG, MPI_SUM, 0, comm);
  std::size_t i = 0;
  for (auto& rw : rows)
    for (auto& res : rw.impls) {
      res.wrong_oop = total[i++];
      res.wrong_ip = total[i++];
    }
  return rows;
}

}  // namespace ddl_bench
#endif  // DDL_BENCH_MPI
