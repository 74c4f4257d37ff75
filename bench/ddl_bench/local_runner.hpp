#pragma once
// ddl-bench on in-process ranks (threads over `ddl::local_transport`): the
// ddl rows and `--baseline ring`, every rank's wrong counts on rank 0's rows.
#include <ddl.hpp>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hand_ring.hpp"
#include "measure.hpp"

namespace ddl_bench {

inline std::vector<row> run_local(const settings& s, const ddl::topology& topo, std::vector<std::string>& labels,
                                  std::string& found) {
  ddl::options opts = ddl::options::from_env();
  if (s.chunk_bytes) opts.chunk_bytes = s.chunk_bytes;
  const auto sizes = sweep(s, s.ranks);
  // One expected array the threads fill together, except for the
  // all-to-all and sendrecv, whose ranks each expect something else.
  const bool own = s.coll == collective::all_to_all || s.coll == collective::sendrecv;
  std::unique_ptr<std::byte[]> expected(own ? nullptr : new std::byte[sizes.empty() ? 8 : sizes.back()]);
  ddl::thread_barrier bar(s.ranks);
  std::vector<std::vector<row>> per_rank(static_cast<std::size_t>(s.ranks));
  std::mutex m;
  ddl::local_fabric::run(s.ranks, [&](ddl::local_transport& t) {
    auto impls = ddl_impls(t, s, topo, opts);
    for (const auto& b : s.baselines)  // `parse` lets only `ring` through without MPI
      if (b == "ring") add_hand_ring(impls, found, s, t.rank(), t.size(), local_ring_exchange(t));
    if (t.rank() == 0) {
      std::lock_guard<std::mutex> lock(m);
      for (const auto& i : impls) labels.push_back(i.label);
    }
    per_rank[static_cast<std::size_t>(t.rank())] =
        rank_sweep(t.rank(), t.size(), s, impls, [&] { bar.arrive_and_wait(); }, expected.get());
  });
  std::vector<row> rows = per_rank[0];
  for (std::size_t r = 1; r < per_rank.size(); ++r) add_wrong(rows, per_rank[r]);
  return rows;
}

}  // namespace ddl_bench
