#pragma once
// The correctness matrix every strategy must pass on the in-process
// transport: every dtype x op x collective x placement (out-of-place and in
// place) over counts {0, 1, n-1, n, n+1, a prime, 2^20+3} (past 4099
// elements the ops sum and avg: `op_at_count`). Outputs start
// sentinel-filled; expected values are exact reductions computed
// independently of any strategy; inputs must come back untouched. (A
// reduce-scatter and all-gather that are the ring's run for one dtype only:
// `ring_scatter_gather_v`.)
#include <algorithm>
#include <cstring>
#include <set>
#include <sstream>
#include <type_traits>
#include <vector>

#include "support.hpp"

namespace ddl_test {

inline std::vector<std::size_t> matrix_counts(int n, std::size_t large) {
  std::set<std::size_t> s{0, 1, static_cast<std::size_t>(n - 1), static_cast<std::size_t>(n),
                          static_cast<std::size_t>(n + 1), 1009};
  if (large) s.insert(large);
  return {s.begin(), s.end()};
}

// Every op runs at every count up to `every_op_up_to`; past it only sum (whose
// inputs tell every element's sources apart) and avg (the one op with a pass
// of its own, the division at the end). Past a few thousand elements a
// collective's paths (chunks, pipeline windows, blocks, stages) do not depend
// on the op, which reaches only the element kernels, and those run every op
// at 1009 elements (past every vector width, with tails) and below. The other
// three ops at 2^20 elements were about half of the matrix's time.
inline constexpr std::size_t every_op_up_to = 4099;
inline bool op_at_count(ddl::op o, std::size_t count) {
  return count <= every_op_up_to || o == ddl::op::sum || o == ddl::op::avg;
}

// Bytes of each buffer `matrix_rank` uses for `counts`.
inline std::size_t matrix_bytes(const std::vector<std::size_t>& counts) {
  return std::max<std::size_t>(*std::max_element(counts.begin(), counts.end()), 1) * 8;
}

// A rank's input or output buffer: `given` (`matrix_bytes` long) or its own.
struct matrix_buffer {
  matrix_buffer(std::byte* given, std::size_t bytes) : at(given) {
    if (!at) {
      own.resize(bytes);
      at = own.data();
    }
  }
  std::byte* data() const { return at; }
  std::byte* at;
  std::vector<std::byte> own;
};

// Strategies whose reduce-scatter and all-gather are the ring's
// (`detail::ring_scatter_gather`: recursive doubling, halving-doubling) run
// those two in the matrix for float32 only, which checks that they reach the
// ring; the ring's own matrix runs them for every dtype.
template <class Strategy>
inline constexpr bool ring_scatter_gather_v = std::is_base_of_v<ddl::detail::ring_scatter_gather, Strategy>;

// One rank's share of the matrix over any transport. With `shared`, the
// ranks are threads that split the work of filling `expected` and meet at
// `barrier`; without, each rank fills all of its own `expected`. The input
// and output buffers are `in_mem` and `out_mem` where given (`matrix_bytes`
// each: e.g. `ddl::shared_buffer`s), else vectors. The views say their
// buffers lie at `where` (host memory all the same: for transports whose
// "device" is the host, as the staging tests' is).
template <class Strategy, class Transport, class Barrier>
void matrix_rank(Transport& t, const std::vector<std::size_t>& counts, failure_log& log, const ddl::options& opts,
                 const Strategy& strategy, std::byte* expected_bytes, bool shared, Barrier&& barrier,
                 std::byte* in_mem = nullptr, std::byte* out_mem = nullptr, ddl::location at = {}) {
  const std::size_t bytes = matrix_bytes(counts);
  const int n = t.size();
  {
    ddl::communicator<Strategy, Transport> comm(t, strategy, opts);
    const int r = t.rank();
    matrix_buffer in(in_mem, bytes), out(out_mem, bytes);
    std::vector<std::byte> keep(bytes);
    auto view_at = [&](auto* p, std::size_t count) {
      auto v = ddl::host_view(p, count);
      v.where = at;
      return v;
    };
    auto where = [&](const char* coll, const char* placement, ddl::dtype dt, ddl::op o, std::size_t count,
                     std::size_t i) {
      std::ostringstream m;
      m << strategy.describe() << " " << coll << " (" << placement << ") n=" << n << " rank=" << r
        << " dtype=" << ddl::name_of(dt) << " op=" << ddl::name_of(o) << " count=" << count
        << ": first wrong element " << i;
      return m.str();
    };
    for (ddl::dtype dt : ddl::all_dtypes) {
      ddl::visit_dtype(dt, [&](auto tag) {
        using T = decltype(tag);
        T* E = reinterpret_cast<T*>(expected_bytes);
        T* I = reinterpret_cast<T*>(in.data());
        T* O = reinterpret_cast<T*>(out.data());
        const bool scatter_gather = !ring_scatter_gather_v<Strategy> || dt == ddl::dtype::float32;
        for (std::size_t count : counts) {
          const ddl::block mine = ddl::block_of(count, n, r);
          const std::size_t cb = count * sizeof(T);
          auto check_range = [&](const T* got, std::size_t first, std::size_t len, const char* coll,
                                 const char* placement, ddl::op o) {
            if (len == 0 || std::memcmp(got, E + first, len * sizeof(T)) == 0) return;  // bits equal throughout
            for (std::size_t k = 0; k < len; ++k)
              if (!same_bits(got[k], E[first + k])) {
                log.add(where(coll, placement, dt, o, count, first + k));
                return;
              }
          };
          auto input_intact = [&](const char* coll, ddl::op o) {
            if (cb && std::memcmp(in.data(), keep.data(), cb) != 0) log.add(where(coll, "input modified", dt, o, count, 0));
          };
          for (ddl::op o : ddl::all_ops) {
            if (!op_at_count(o, count)) continue;  // the same on every rank: the barriers stay paired
            barrier();  // everyone is done reading E
            const ddl::block fill = shared ? mine : ddl::block{0, count};
            for (std::size_t i = fill.offset; i < fill.offset + fill.size; ++i) E[i] = expected_value<T>(o, n, i);
            for (std::size_t i = 0; i < count; ++i) I[i] = to_element<T>(input_value(ddl::dtype_of_v<T>, o, r, i));
            std::memcpy(keep.data(), in.data(), cb);
            barrier();  // E is complete

            std::memset(out.data(), sentinel, cb);
            comm.all_reduce(view_at(static_cast<const T*>(I), count), view_at(O, count), o);
            check_range(O, 0, count, "all_reduce", "out-of-place", o);
            input_intact("all_reduce", o);

            std::memcpy(out.data(), in.data(), cb);
            comm.all_reduce(view_at(O, count), o);
            check_range(O, 0, count, "all_reduce", "in-place", o);
            if (!scatter_gather) continue;

            std::memset(out.data(), sentinel, cb);
            comm.reduce_scatter(view_at(static_cast<const T*>(I), count), view_at(O, mine.size), o);
            check_range(O, mine.offset, mine.size, "reduce_scatter", "out-of-place", o);
            input_intact("reduce_scatter", o);

            std::memcpy(out.data(), in.data(), cb);
            comm.reduce_scatter(view_at(static_cast<const T*>(O), count), view_at(O + mine.offset, mine.size), o);
            check_range(O + mine.offset, mine.offset, mine.size, "reduce_scatter", "in-place", o);
          }
          if (scatter_gather) {
            // all_gather: element i comes from the rank whose block holds i.
            barrier();
            for (int q = shared ? r : 0; q < (shared ? r + 1 : n); ++q) {  // shared: each fills its own block
              const ddl::block b = ddl::block_of(count, n, q);
              for (std::size_t i = b.offset; i < b.offset + b.size; ++i)
                E[i] = to_element<T>(input_value(ddl::dtype_of_v<T>, ddl::op::sum, q, i));
            }
            barrier();  // E complete
            std::memcpy(in.data(), E + mine.offset, mine.size * sizeof(T));
            std::memcpy(keep.data(), in.data(), mine.size * sizeof(T));
            std::memset(out.data(), sentinel, cb);
            comm.all_gather(view_at(static_cast<const T*>(I), mine.size), view_at(O, count));
            check_range(O, 0, count, "all_gather", "out-of-place", ddl::op::sum);
            if (std::memcmp(in.data(), keep.data(), mine.size * sizeof(T)) != 0)
              log.add(where("all_gather", "input modified", dt, ddl::op::sum, count, 0));
            std::memset(out.data(), sentinel, cb);
            std::memcpy(O + mine.offset, I, mine.size * sizeof(T));
            comm.all_gather(view_at(static_cast<const T*>(O + mine.offset), mine.size), view_at(O, count));
            check_range(O, 0, count, "all_gather", "in-place", ddl::op::sum);
          }
          barrier();  // E is read by everyone before the next count rewrites it
        }
      });
    }
  }
}

template <class Strategy>
void run_matrix(int n, const std::vector<std::size_t>& counts, failure_log& log, ddl::options opts = {},
                const Strategy& strategy = Strategy{}) {
  const std::size_t maxc = *std::max_element(counts.begin(), counts.end());
  std::vector<std::byte> expected(std::max<std::size_t>(maxc, 1) * 8);
  thread_barrier bar(n);
  ddl::local_fabric::run(n, [&](ddl::local_transport& t) {
    matrix_rank(t, counts, log, opts, strategy, expected.data(), true, [&] { bar.arrive_and_wait(); });
  });
}

}  // namespace ddl_test
