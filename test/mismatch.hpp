#pragma once
// One case of the mismatch matrix (issue 85), for any transport: every rank
// but the last makes one call, the last disagrees on one field, and each
// rank's outcome is collected for `expect_mismatch`. Used by
// test_mismatch.cpp (threads, the simulator) and test_mpi.cpp (MPI).
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <ddl.hpp>

namespace ddl_test {

enum class mismatch { count, dtype, op, strategy, root };
inline constexpr mismatch all_mismatches[] = {mismatch::count, mismatch::dtype, mismatch::op, mismatch::strategy,
                                              mismatch::root};
inline const char* name_of(mismatch m) {
  switch (m) {
    case mismatch::count: return "count";
    case mismatch::dtype: return "dtype";
    case mismatch::op: return "op";
    case mismatch::strategy: return "strategy";
    default: return "root";
  }
}

using matrix_multi_ring = ddl::multi_ring<ddl::dynamic_extents>;

// The strategy a rank of `n` runs (a multi-ring needs its box).
template <class S>
S make_strategy(int n) {
  if constexpr (std::is_same_v<S, matrix_multi_ring>) {
    return n % 2 == 0 ? S(ddl::dynamic_extents{2, n / 2}) : S(ddl::dynamic_extents{1, n});
  } else {
    (void)n;
    return S{};
  }
}

// A row of the matrix: the strategy every rank runs, and the one the last
// rank runs instead in the strategy row.
template <class S, class Other>
struct strategy_pair {
  using strategy = S;
  using other = Other;
};
// Calls `f(strategy_pair<...>{})` for every strategy of the matrix.
template <class F>
void each_strategy(F&& f) {
  f(strategy_pair<ddl::ring, ddl::recursive_doubling>{});
  f(strategy_pair<ddl::recursive_doubling, ddl::halving_doubling>{});
  f(strategy_pair<ddl::halving_doubling, ddl::ring>{});
  f(strategy_pair<matrix_multi_ring, ddl::ring>{});
  f(strategy_pair<ddl::one_shot, ddl::two_shot>{});
  f(strategy_pair<ddl::two_shot, ddl::one_shot>{});
  f(strategy_pair<ddl::auto_strategy, ddl::ring>{});
}

// How one rank's call ended.
struct outcome {
  enum kind { returned, mismatched, timed_out, other } how = other;
  std::string what;
  bool right_data = false;  // returned: it holds what its call promised
};

// The deadline: mismatches are found at once; a root mismatch may leave a
// rank waiting for a root that never sends (its deadline ends it).
inline ddl::options case_options(bool check = false) {
  ddl::options o;
  o.timeout = std::chrono::seconds(4);
  o.check_calls = check;
  return o;
}

// Element i of rank r's input.
inline float value_at(int r, std::size_t i) { return static_cast<float>((r + 1) * 1000 + static_cast<int>(i % 997)); }

// The calls of one rank: `odd` is the rank that disagrees.
template <class Comm>
outcome make_call(Comm& comm, mismatch m, bool odd) {
  const int r = comm.rank(), n = comm.size();
  constexpr std::size_t count = 1000;
  outcome out;
  std::vector<float> g(odd && m == mismatch::count ? count + 1 : count);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = value_at(r, i);
  std::vector<std::int32_t> ints(count, 1);
  try {
    if (m == mismatch::dtype && odd) {
      comm.all_reduce(ddl::host_view(ints), ddl::op::sum);
    } else if (m == mismatch::root) {
      const int root = odd ? 1 : 0;
      comm.broadcast(ddl::host_view(g), root);
      out.right_data = true;
      for (std::size_t i = 0; i < g.size(); ++i) out.right_data = out.right_data && g[i] == value_at(root, i);
    } else {
      comm.all_reduce(ddl::host_view(g), m == mismatch::op && odd ? ddl::op::max : ddl::op::sum);
      out.right_data = true;
      for (std::size_t i = 0; i < g.size(); ++i) {
        float sum = 0;
        for (int q = 0; q < n; ++q) sum += value_at(q, i);
        out.right_data = out.right_data && g[i] == sum;
      }
    }
    out.how = outcome::returned;
    out.what = "returned normally";
  } catch (const ddl::mismatch_error& e) {
    out.how = outcome::mismatched;
    out.what = e.what();
  } catch (const ddl::timeout_error& e) {
    out.how = outcome::timed_out;
    out.what = e.what();
  } catch (const ddl::error& e) {
    out.how = outcome::other;
    out.what = std::string("not a mismatch_error: ") + e.what();
  }
  return out;
}

// One rank's part of a case: the last rank runs `Other` where the others
// run `S` in the strategy row, `S` everywhere else.
template <class S, class Other, class T>
outcome run_case(T& t, mismatch m, const ddl::options& o) {
  const bool odd = t.rank() == t.size() - 1;
  if (m == mismatch::strategy && odd) {
    ddl::communicator<Other, T> comm(t, make_strategy<Other>(t.size()), o);
    return make_call(comm, m, odd);
  }
  ddl::communicator<S, T> comm(t, make_strategy<S>(t.size()), o);
  return make_call(comm, m, odd);
}

// Rank `r`'s outcome of a case among `n`: a `mismatch_error` naming the
// field (with `exact`, as the `DDL_CHECK` round names it: "ranks disagree on
// the <field>") and the rank that disagrees. A root mismatch may instead end
// a rank at its deadline, or let a rank that agrees with the real root
// return with its data: never a return with other data.
inline void expect_rank(const outcome& o, mismatch m, int n, int r, bool exact = false) {
  const std::string odd = "rank " + std::to_string(n - 1);
  std::string field = name_of(m);
  if (exact) field = m == mismatch::count ? "ranks disagree on the input count" : "ranks disagree on the " + field;
  CAPTURE(r);
  CAPTURE(o.what);
  if (m == mismatch::root && !exact) {
    CHECK(o.how != outcome::other);
    if (o.how == outcome::returned) {
      CHECK(o.right_data);
      CHECK(r != n - 1);
    }
  } else {
    CHECK(o.how == outcome::mismatched);
  }
  if (o.how != outcome::mismatched) return;
  CHECK(o.what.find(field) != std::string::npos);
  CHECK(o.what.find(odd) != std::string::npos);
}

// Every rank's outcome of a case (`expect_rank`).
inline void expect_mismatch(const std::vector<outcome>& out, mismatch m, int n, bool exact = false) {
  for (int r = 0; r < n; ++r) expect_rank(out[static_cast<std::size_t>(r)], m, n, r, exact);
}

}  // namespace ddl_test
