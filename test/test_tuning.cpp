// Measured choices (`DDL_TUNE`, all-gathers and broadcasts by default):
// candidates, trials exact on every rank, one plan on all, drift, and a
// rank that runs another plan named as a mismatch.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "matrix.hpp"

using namespace ddl_test;

namespace {
// `most_calls + 2` in-place sums of a vector of `count` floats through `comm`
// on `n` threads, each checked exactly (the trials run every candidate).
template <class Comm>
void sums_through_trials(Comm& comm, int rank, int n, std::size_t count) {
  std::vector<float> v(count);
  for (int call = 0; call < ddl::detail::plan_tuner::most_calls + 2; ++call) {
    const std::size_t c = static_cast<std::size_t>(call);
    for (std::size_t i = 0; i < count; ++i) v[i] = static_cast<float>((i % 7) + static_cast<std::size_t>(rank) + c);
    comm.all_reduce(ddl::host_view(v), ddl::op::sum);
    const std::size_t ranks = static_cast<std::size_t>(n);
    for (std::size_t i = 0; i < count; ++i)
      if (v[i] != static_cast<float>(ranks * (i % 7) + ranks * (ranks - 1) / 2 + ranks * c))
        throw std::runtime_error("call " + std::to_string(call) + " wrong at " + std::to_string(i));
  }
}
// The line of `comm.explain(bytes)` that gives the all-reduce trials at
// `bytes` (in place or not), or "".
template <class Comm>
std::string measured_line(const Comm& comm, std::size_t bytes, bool in_place) {
  const std::string e = comm.explain(bytes);
  const std::size_t at = e.find("# measured at " + std::to_string(bytes) + " bytes" + (in_place ? ", in place:" : ":"));
  return at == std::string::npos ? std::string() : e.substr(at, e.find('\n', at) - at);
}
}  // namespace

TEST_CASE("auto over threads measures two_shot streaming what it gathers: exact through the trials, never the "
          "model's choice, not for reduce-scatters (which gather nothing)") {
  ddl::local_fabric::run(4, [](ddl::local_transport& t) {
    if (!ddl::plan_for::transport(t).streams_stages) throw std::runtime_error("threads offer no streamed two_shot");
    ddl::communicator<ddl::auto_strategy, ddl::local_transport> comm(
        t, ddl::auto_strategy(ddl::topology::uniform(4, 4e9, 8e-6)));
    const std::size_t count = std::size_t{1} << 20, bytes = count * sizeof(float);
    const ddl::plan model = comm.strategy().running(bytes);
    if (model.algo != ddl::algorithm::two_shot || model.streams)
      throw std::runtime_error("the model's plan at 4 MiB is " + ddl::describe(comm.strategy().topo(), model));
    if (comm.explain(bytes).find("two_shot (streamed)") == std::string::npos)
      throw std::runtime_error("explain lists no streamed two_shot");
    sums_through_trials(comm, t.rank(), 4, count);
    if (measured_line(comm, bytes, true).find("two_shot (streamed)") == std::string::npos)
      throw std::runtime_error("the streamed form was not measured:\n" + comm.explain(bytes));
    std::vector<float> v(count);
    const ddl::block mine = ddl::block_of(count, 4, t.rank());
    std::vector<float> out(mine.size);
    for (int call = 0; call < ddl::detail::plan_tuner::most_calls + 2; ++call)
      comm.reduce_scatter(ddl::host_view(v), ddl::host_view(out), ddl::op::sum);
    if (comm.explain(bytes).find("# reduce-scatter measured") != std::string::npos)
      throw std::runtime_error("a threads' reduce-scatter was measured against itself");
  });
}

TEST_CASE("auto over 4 threads measures two_shot against the model's one_shot (the same bits): exact through the "
          "trials, and runs the one starred") {
  ddl::local_fabric::run(4, [](ddl::local_transport& t) {
    ddl::communicator<ddl::auto_strategy, ddl::local_transport> comm(
        t, ddl::auto_strategy(ddl::topology::uniform(4, 4e9, 8e-6)));
    const std::size_t count = std::size_t{1} << 14, bytes = count * sizeof(float);  // 64 KiB: measured by default
    const auto& s = comm.strategy();
    if (s.running(bytes, true).algo != ddl::algorithm::one_shot)
      throw std::runtime_error("the model's plan at 64 KiB in place is not one_shot:\n" + comm.explain(bytes));
    sums_through_trials(comm, t.rank(), 4, count);
    const std::string line = measured_line(comm, bytes, true);
    for (const char* plan : {"one_shot", "two_shot ", "two_shot (streamed)"})
      if (line.find(plan) == std::string::npos)
        throw std::runtime_error(std::string("not measured: ") + plan + "\n" + comm.explain(bytes));
    if (line.find("ring") != std::string::npos || line.find("doubling") != std::string::npos)
      throw std::runtime_error("a plan of other bits measured:\n" + line);
    const std::string chosen = line.substr(line.find('*') + 1, line.find(" us", line.find('*')) - line.find('*') - 1);
    const std::string runs = ddl::describe(s.topo(), s.running(bytes, true));
    if (chosen.rfind(runs + " ", 0) != 0) throw std::runtime_error("sums run " + runs + ", the trials chose " + chosen);
    // Floats' min too: the direct plans reach the same bits for it, so it
    // follows the class's choice.
    if (ddl::describe(s.topo(), s.running(bytes, true, {ddl::dtype::float32, ddl::op::min})) != runs)
      throw std::runtime_error("floats' min does not run the class's choice " + runs);
    std::vector<float> w(count, static_cast<float>(t.rank()));
    for (int call = 0; call < ddl::detail::plan_tuner::most_calls + 2; ++call) {
      comm.all_reduce(ddl::host_view(w), ddl::op::min);
      if (w[count / 2] != 0.0f) throw std::runtime_error("min wrong");
    }
  });
}

TEST_CASE("auto on 2 threads measures every algorithm for sums from 16 KiB: exact through the trials, one plan on "
          "both ranks; floats' min is not measured") {
  ddl::local_fabric::run(2, [](ddl::local_transport& t) {
    ddl::communicator<ddl::auto_strategy, ddl::local_transport> comm(
        t, ddl::auto_strategy(ddl::topology::uniform(2, 4e9, 8e-6)));
    const std::size_t count = std::size_t{1} << 18, bytes = count * sizeof(float);
    sums_through_trials(comm, t.rank(), 2, count);
    const std::string line = measured_line(comm, bytes, true);
    for (const char* form : {"ring (flat, 2)", "recursive_doubling", "two_shot (streamed)"})
      if (line.find(form) == std::string::npos)
        throw std::runtime_error(std::string("not measured: ") + form + "\n" + comm.explain(bytes));
    if (line.find("two_shot") == line.rfind("two_shot"))
      throw std::runtime_error("two_shot cached not measured\n" + comm.explain(bytes));
    // A class below 64 KiB (20 KB, `small_trials` calls a candidate): measured too, not one below 16 KiB.
    sums_through_trials(comm, t.rank(), 2, 5000);
    sums_through_trials(comm, t.rank(), 2, 4000);
    if (measured_line(comm, 20000, true).find(',') == std::string::npos)
      throw std::runtime_error("20 KB not measured\n" + comm.explain(20000));
    if (!measured_line(comm, 16000, true).empty())
      throw std::runtime_error("16000 B measured\n" + comm.explain(16000));
    // Both ranks run the one plan they agreed on (else: mismatch_error).
    std::vector<float> v(count, 1.0f);
    for (int call = 0; call < 3; ++call) comm.all_reduce(ddl::host_view(v), ddl::op::sum);
    // `running` names the plan each reduction runs: sums the one starred in
    // the trials' line, floats' min (never measured at this size) the model's.
    const auto& s = comm.strategy();
    const std::string chosen = line.substr(line.find('*') + 1, line.find(" us", line.find('*')) - line.find('*') - 1);
    const std::string sum_runs = ddl::describe(s.topo(), s.running(bytes, true));
    if (chosen.rfind(sum_runs + " ", 0) != 0)
      throw std::runtime_error("sums run " + sum_runs + ", the trials chose " + chosen);
    const std::string min_runs = ddl::describe(s.topo(), s.running(bytes, true, {ddl::dtype::float32, ddl::op::min}));
    const std::string model = ddl::describe(s.topo(), s.choose(bytes, ddl::candidates::all, true));
    if (min_runs != model) throw std::runtime_error("floats' min runs " + min_runs + ", the model's " + model);
    // Floats' min at another size: no algorithm measured against another
    // (at most the direct plans, which reach the same bits).
    std::vector<float> w(count * 4, static_cast<float>(t.rank()));
    for (int call = 0; call < ddl::detail::plan_tuner::most_calls + 2; ++call) {
      comm.all_reduce(ddl::host_view(w), ddl::op::min);
      if (w[count] != 0.0f) throw std::runtime_error("min wrong");
    }
    const std::string mline = measured_line(comm, w.size() * sizeof(float), true);
    for (const char* other : {"ring", "doubling"})
      if (mline.find(other) != std::string::npos) throw std::runtime_error("floats' min measured against " + std::string(other));
  });
}

TEST_CASE("tuning: the model's close candidates, the slowest rank decides, the model keeps near-ties") {
  const auto t4 = ddl::topology::uniform(4, 4e9, 8e-6);
  const ddl::plan_for q{ddl::candidates::all, true, true};
  for (double bytes : {8.0, 32768.0, 4e6}) {
    CAPTURE(bytes);
    const auto c = ddl::detail::tuning_candidates(t4, bytes, q, 3.0, 4);
    REQUIRE(!c.empty());
    CHECK(c.size() <= 4);
    CHECK(c.front().algo == ddl::best_plan(t4, bytes, q).algo);
    int rings = 0;
    for (const auto& p : c) {
      CHECK(p.seconds <= 3.0 * c.front().seconds);
      rings += p.algo == ddl::algorithm::multi_ring;
    }
    CHECK(rings <= 1);
  }
  CHECK(ddl::detail::tuning_candidates(t4, 32768, q, 3.0, 4).size() == 4);  // rd, two_shot, one_shot, hd
  CHECK(ddl::detail::tuning_candidates(t4, 32768, q, 3.0, 2).size() == 2);
  CHECK(ddl::detail::tuning_candidates(t4, 32768, q, 1.0, 4).size() == 1);

  const double inf = std::numeric_limits<double>::infinity();
  // 3 ranks x stride 4; candidate 1 is fastest on ranks 0 and 1 but slow on rank 2.
  const double table[] = {10, 2, 5, -1,  //
                          10, 2, 6, -1,  //
                          11, 20, 7, -1};
  double worst[4] = {};
  ddl::detail::slowest_of(table, 3, 4, 3, worst);
  CHECK(worst[0] == 11);
  CHECK(worst[1] == 20);
  CHECK(worst[2] == 7);
  CHECK(ddl::detail::tuning_decision(worst, 3, 0.93) == 2);
  const double near[] = {10, 9.5, 9.4};  // 6% faster: not enough
  CHECK(ddl::detail::tuning_decision(near, 3, 0.93) == 0);
  const double unmeasured[] = {10, inf, 9};
  CHECK(ddl::detail::tuning_decision(unmeasured, 3, 0.93) == 2);
  const double none[] = {inf, inf};
  CHECK(ddl::detail::tuning_decision(none, 2, 0.93) == 0);

  // Plans fold into the stamp's hash bits only: call number, phase, collective, dtype and op stay.
  const ddl::tag base = ddl::detail::call_tag(12, ddl::detail::make_stamp(ddl::detail::call_kind::all_reduce,
                                                                           ddl::dtype::float32, ddl::op::sum, 8192,
                                                                           8192, -1, "auto")) + 2;
  const auto c = ddl::detail::tuning_candidates(t4, 32768, q, 3.0, 4);
  for (std::size_t i = 0; i < c.size(); ++i) {
    const ddl::tag a = ddl::detail::with_plan_stamp(base, c[i]);
    CHECK(ddl::detail::call_of(a) == 12);
    CHECK((a & 0xffu) == 2);
    CHECK((ddl::detail::stamp_of(a) & ddl::detail::stamp_fields_mask) ==
          (ddl::detail::stamp_of(base) & ddl::detail::stamp_fields_mask));
    for (std::size_t j = 0; j < i; ++j) CHECK(ddl::detail::stamps_disagree(a, ddl::detail::with_plan_stamp(base, c[j])));
  }
  CHECK(ddl::detail::with_plan_stamp(77, c[0]) == 77);  // a program's own tags are left alone
}

namespace {
// `calls` all-reduces of `count` floats per placement on every rank of an
// in-process group, each result checked; returns each rank's plan per
// placement and its explain report.
struct tuned_rank {
  std::string out_of_place, in_place, report;
};
std::vector<tuned_rank> tune_on_threads(int n, std::size_t count, int calls, const ddl::options& opts,
                                        failure_log& log) {
  std::vector<tuned_rank> seen(static_cast<std::size_t>(n));
  ddl::local_fabric::run(n, [&](ddl::local_transport& tr) {
    const int r = tr.rank();
    ddl::communicator<ddl::auto_strategy, ddl::local_transport> comm(tr, ddl::auto_strategy{}, opts);
    std::vector<float> in(count), out(count);
    for (int k = 0; k < calls; ++k) {
      for (bool ip : {false, true}) {
        for (std::size_t i = 0; i < count; ++i) in[i] = static_cast<float>((r + 1) * ((i + k) % 13));
        if (ip) comm.all_reduce(ddl::host_view(in), ddl::op::sum);
        else comm.all_reduce(ddl::host_view(std::as_const(in)), ddl::host_view(out), ddl::op::sum);
        const float* got = ip ? in.data() : out.data();
        for (std::size_t i = 0; i < count; ++i) {
          const float want = static_cast<float>(n * (n + 1) / 2 * ((i + k) % 13));
          if (got[i] != want) {
            log.add("n=" + std::to_string(n) + " rank " + std::to_string(r) + " call " + std::to_string(k) +
                    (ip ? " in place" : " out of place") + ": element " + std::to_string(i) + " is " +
                    std::to_string(got[i]) + ", not " + std::to_string(want));
            break;
          }
        }
      }
    }
    const auto& s = comm.strategy();
    seen[static_cast<std::size_t>(r)] = {ddl::describe(s.topo(), s.running(count * 4, false)),
                                         ddl::describe(s.topo(), s.running(count * 4, true)),
                                         comm.explain(count * 4)};
  });
  return seen;
}
}  // namespace

TEST_CASE("a measured choice that follows drift: measured again once its choice turns slow on the ranks, and left "
          "while it holds, larger calls of its class included") {
  using tuner = ddl::detail::measured_choice<ddl::plan>;
  const std::size_t bytes = std::size_t{1} << 20;
  std::vector<std::string> seen(2);
  ddl::local_fabric::run(2, [&](ddl::local_transport& tr) {
    const ddl::options o;
    const ddl::memory_ops host = ddl::host_memory_ops();
    tuner choice(true), fixed;  // following drift, and not
    ddl::plan cached{}, streamed{};
    cached.algo = streamed.algo = ddl::algorithm::two_shot;
    streamed.streams = true;
    bool cached_slow = false;  // the same on both ranks, call by call
    double stretch = 1;        // a call's time against one of `bytes`
    auto run = [&](const ddl::plan& p, const ddl::call_context&) {
      const bool slow = p.streams ? !cached_slow : cached_slow;
      std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int>((slow ? 4000 : 1000) * stretch)));
    };
    ddl::tag k = 0;
    auto calls = [&](int count, std::size_t size = 0) {  // 0: `bytes`
      for (int i = 0; i < count; ++i)
        for (tuner* m : {&choice, &fixed}) {
          ddl::call_context c;
          c.opts = &o;
          c.mem = &host;
          c.base_tag = ++k << 8;
          m->run(tr, size ? size : bytes, false, cached, c, [&] { return std::vector<ddl::plan>{cached, streamed}; },
                 run);
        }
    };
    calls(1 + 2 * tuner::trials);  // the warm-up and the trials: cached is faster
    CHECK(choice.measurements(bytes, false) == 1);
    CHECK_FALSE(choice.running(bytes, false, cached).streams);
    calls(tuner::drift_window);  // a window in which the choice holds: nothing changes
    CHECK(choice.measurements(bytes, false) == 1);
    // Calls of the same class 1.9x as large, and 1.3x slower than that
    // again (2.5x the trials' time): slow against the trials, not against
    // the trials scaled to their size; nothing changes.
    stretch = 1.9 * 1.3;
    calls(tuner::drift_window, bytes * 19 / 10);
    stretch = 1;
    calls(1 + 2 * tuner::trials);  // as many calls as a measurement again would take
    CHECK(choice.measurements(bytes, false) == 1);
    cached_slow = true;  // the placement moves: streamed is faster now
    calls(tuner::drift_window + 1 + 2 * tuner::trials);
    CHECK(choice.measurements(bytes, false) == 2);
    CHECK(choice.running(bytes, false, cached).streams);
    CHECK(fixed.measurements(bytes, false) == 1);  // one that does not follow drift keeps its choice
    CHECK_FALSE(fixed.running(bytes, false, cached).streams);
    seen[static_cast<std::size_t>(tr.rank())] =
        choice.report("", [&](const ddl::plan& p) { return ddl::describe(ddl::topology::uniform(2, 1e9, 1e-6), p); });
  });
  CHECK(seen[0] == seen[1]);
  CHECK(seen[0].find("# measured at 1048576 bytes (2 times: drift): two_shot") != std::string::npos);
  CHECK(seen[0].find("*two_shot (streamed)") != std::string::npos);
}

TEST_CASE("a measured choice times small classes with more calls a candidate, and copies from 16 KiB on 2 ranks") {
  using tuner = ddl::detail::measured_choice<ddl::plan>;
  CHECK(tuner::trials_for(tuner::copies_from - 1) == tuner::small_trials);
  CHECK(tuner::trials_for(tuner::copies_from) == tuner::trials);
  CHECK(tuner::small_trials > tuner::trials);
  CHECK(tuner::most_calls == tuner::most_calls_for(1));
  CHECK(tuner::copies_from_for(2) < tuner::copies_from_for(3));
  CHECK(tuner::copies_from_for(4) == tuner::copies_from);
  ddl::local_fabric::run(2, [&](ddl::local_transport& tr) {
    ddl::options o;
    const ddl::memory_ops host = ddl::host_memory_ops();
    ddl::call_context probe;
    probe.opts = &o;
    probe.mem = &host;
    // Copies: 2 ranks from 16 KiB (3 ranks would not, nor would reductions, `tune_bytes` being 0).
    if (!tuner::applies(tr, probe, tuner::pair_copies_from, true) ||
        tuner::applies(tr, probe, tuner::pair_copies_from - 1, true) || tuner::applies(tr, probe, tuner::pair_copies_from))
      throw std::runtime_error("2 ranks: copies not measured from pair_copies_from alone");
    ddl::plan a{}, b{};
    a.algo = ddl::algorithm::multi_ring;
    b.algo = ddl::algorithm::recursive_doubling;
    ddl::tag k = 0;
    for (std::size_t bytes : {std::size_t{20000}, std::size_t{1} << 20}) {
      tuner choice;
      const int calls = 1 + 2 * tuner::trials_for(bytes);
      for (int i = 0; i < calls; ++i) {
        ddl::call_context c = probe;
        c.base_tag = ++k << 8;
        choice.run(tr, bytes, false, a, c, [&] { return std::vector<ddl::plan>{a, b}; },
                   [](const ddl::plan&, const ddl::call_context&) {});
        // Decided after the warm-up and every candidate's trials, not before.
        if (choice.measurements(bytes, false) != (i + 1 == calls ? 1 : 0))
          throw std::runtime_error("class of " + std::to_string(bytes) + " bytes: measured after call " +
                                   std::to_string(i + 1) + " of " + std::to_string(calls));
      }
    }
  });
}

TEST_CASE("auto tunes on in-process ranks: exact before, during and after, and every rank settles on one plan") {
  failure_log log;
  for (int n : {2, 3, 4, 5}) {
    for (std::size_t count : {std::size_t{1}, std::size_t{2049}, std::size_t{8192}}) {
      CAPTURE(n);
      CAPTURE(count);
      const int calls = ddl::detail::plan_tuner::most_calls + 3;
      ddl::options on;
      on.tune_bytes = std::size_t{16} << 20;
      const auto seen = tune_on_threads(n, count, calls, on, log);
      for (const auto& s : seen) {
        CHECK(s.out_of_place == seen[0].out_of_place);
        CHECK(s.in_place == seen[0].in_place);
      }
      // Measured in both placements, and said so by explain (when there was a choice).
      const auto topo =
          ddl::topology::uniform(n, ddl::local_transport::default_bandwidth, ddl::local_transport::default_latency);
      const auto c = ddl::detail::tuning_candidates(
          topo, count * 4.0, ddl::plan_for::transport<ddl::local_transport>(ddl::candidates::all, true), 3.0, 4);
      if (c.size() > 1) {
        CHECK(seen[0].report.find(", in place:") != std::string::npos);
        CHECK(seen[0].report.find("*") != std::string::npos);
      }
    }
  }
  CHECK_MESSAGE(log.count() == 0, log.summary());

  // Off by default (DDL_TUNE=0): the model alone, nothing measured.
  ddl::options off;
  CHECK(off.tune_bytes == 0);
  const auto seen = tune_on_threads(4, 8192, 20, off, log);
  const auto t4 = ddl::topology::uniform(4, ddl::local_transport::default_bandwidth, ddl::local_transport::default_latency);
  CHECK(seen[0].report.find("measured") == std::string::npos);
  CHECK(seen[0].in_place ==
        ddl::describe(t4, ddl::best_plan(t4, 32768, ddl::plan_for::transport<ddl::local_transport>(ddl::candidates::all, true))));
  CHECK_MESSAGE(log.count() == 0, log.summary());
}

namespace {
// Tuning off on rank 0 only (`off` clears the option on the ranks it is given
// true), on the others: every rank ends its calls (`call(comm, n)`, at most
// `plan_tuner::most_calls` of them) with a mismatch_error naming the plan.
template <class Off, class Call>
void check_tuning_on_one_side_is_a_mismatch(Off off, Call call) {
  for (int n : {2, 4}) {
    CAPTURE(n);
    std::vector<std::string> errors(static_cast<std::size_t>(n));
    ddl::local_fabric::run(n, [&](ddl::local_transport& tr) {
      ddl::options o;
      o.timeout = std::chrono::seconds(20);
      off(o, tr.rank() == 0);
      ddl::communicator<ddl::auto_strategy, ddl::local_transport> comm(tr, ddl::auto_strategy{}, o);
      std::string& e = errors[static_cast<std::size_t>(tr.rank())];
      e = "no error";
      for (int k = 0; k < ddl::detail::plan_tuner::most_calls && e == "no error"; ++k) {
        try {
          call(comm, n);
        } catch (const ddl::mismatch_error& x) {
          e = x.what();
        } catch (const std::exception& x) {
          e = std::string("not a mismatch_error: ") + x.what();
        }
      }
    });
    for (const auto& e : errors) {
      CAPTURE(e);
      CHECK(e.find("under auto, the plan") != std::string::npos);
    }
  }
}
}  // namespace

TEST_CASE("auto tuning: a rank that runs another plan (here: tuning off on one rank) is a mismatch_error everywhere") {
  // The first trial runs the model's plan, as rank 0 does; the next ones differ.
  check_tuning_on_one_side_is_a_mismatch([](ddl::options& o, bool off) { o.tune_bytes = off ? 0 : std::size_t{16} << 20; },
                                         [](auto& comm, int) {
                                           std::vector<float> v(8192, 1.0f);
                                           comm.all_reduce(ddl::host_view(v), ddl::op::sum);
                                         });
}

TEST_CASE("all-gathers are measured by default on in-process ranks: exact through the trials, one plan on every rank") {
  // On by default (they copy and never reduce: every plan gives the same bits).
  CHECK(ddl::options{}.tune_copies_bytes == std::numeric_limits<std::size_t>::max());
  failure_log log;
  for (int n : {2, 3, 4, 5}) {
    // 2500 a rank: 20-50 KB, measured (with `small_trials` a candidate) on 2 ranks alone.
    for (std::size_t per : {std::size_t{1}, std::size_t{1000}, std::size_t{2500}, std::size_t{17001}}) {
      CAPTURE(n);
      CAPTURE(per);
      const std::size_t count = per * static_cast<std::size_t>(n), bytes = count * 4;
      std::vector<std::string> chosen(static_cast<std::size_t>(n)), report(static_cast<std::size_t>(n));
      ddl::local_fabric::run(n, [&](ddl::local_transport& tr) {
        const int r = tr.rank();
        ddl::communicator<ddl::auto_strategy, ddl::local_transport> comm(tr, ddl::auto_strategy{}, ddl::options{});
        check_all_gathers<std::int32_t>(
            comm, r, n, per, ddl::detail::plan_tuner::most_calls + 3,
            [](int rank, std::size_t i, int k) { return static_cast<std::int32_t>(rank * 100003 + 7 * i) + k; }, log,
            "n=" + std::to_string(n) + " per " + std::to_string(per));
        const auto& st = comm.strategy();
        chosen[static_cast<std::size_t>(r)] = ddl::describe(st.topo(), st.running_all_gather(bytes)) + " | " +
                                              ddl::describe(st.topo(), st.running_all_gather(bytes, true));
        report[static_cast<std::size_t>(r)] = comm.explain(bytes);
      });
      for (const auto& c : chosen) CHECK(c == chosen[0]);
      // Threads offer the direct form and the multi-ring at least: measured in
      // both placements, from `copies_from_for(n)`.
      CAPTURE(report[0]);
      const bool measured = bytes >= ddl::detail::plan_tuner::copies_from_for(n);
      CHECK((report[0].find("# all-gather measured at " + std::to_string(bytes) + " bytes:") != std::string::npos) ==
            measured);
      CHECK((report[0].find("# all-gather measured at " + std::to_string(bytes) + " bytes, in place:") !=
             std::string::npos) == measured);
    }
  }
  CHECK_MESSAGE(log.count() == 0, log.summary());

  // Off (DDL_TUNE_COPIES=0): the model's plan, nothing measured.
  ddl::local_fabric::run(4, [&](ddl::local_transport& tr) {
    ddl::options off;
    off.tune_copies_bytes = 0;
    ddl::communicator<ddl::auto_strategy, ddl::local_transport> comm(tr, ddl::auto_strategy{}, off);
    std::vector<float> own(20000, static_cast<float>(tr.rank())), out(80000);  // 320 KB: measured when on
    for (int k = 0; k < ddl::detail::plan_tuner::most_calls + 1; ++k)
      comm.all_gather(ddl::host_view(std::as_const(own)), ddl::host_view(out));
    CHECK(out[79999] == 3.0f);
    CHECK(comm.explain(320000).find("all-gather measured") == std::string::npos);
  });
}

TEST_CASE("all-gather tuning: a rank that runs another plan (here: tuning off on one rank) is a mismatch_error everywhere") {
  // Rank 0 runs the model's plan on the call's own tag, the others each
  // trial (the first too) under its plan's stamp: a mismatch from the first call.
  check_tuning_on_one_side_is_a_mismatch(
      [](ddl::options& o, bool off) { o.tune_copies_bytes = off ? 0 : std::size_t{16} << 20; },
      [](auto& comm, int n) {
        std::vector<float> own(8192, 1.0f), out(8192 * static_cast<std::size_t>(n));
        comm.all_gather(ddl::host_view(std::as_const(own)), ddl::host_view(out));
      });
}

TEST_CASE("tuning: broadcast candidates are the model's choice, then the algorithms priced within 3x") {
  for (int n : {2, 3, 4, 8}) {
    const auto topo = ddl::topology::uniform(n, 2e9, 20e-6);
    for (std::size_t bytes : {std::size_t{4}, std::size_t{4096}, std::size_t{262144}, std::size_t{16} << 20}) {
      CAPTURE(n);
      CAPTURE(bytes);
      const auto c = ddl::detail::tuning_candidates(bytes, topo, 4, 3.0, 4);
      REQUIRE(!c.empty());
      const auto model = ddl::broadcast_choice(bytes, topo, 4);
      CHECK(c.front().algo == model.algo);
      CHECK(c.front().seconds == model.seconds);
      CHECK(c.size() <= 3);
      if (n == 2) CHECK(c.size() == 1);  // only the tree
      for (const auto& p : c) {
        CHECK(p.seconds <= 3.0 * c.front().seconds);
        // No scatter with fewer elements than ranks.
        if (bytes / 4 < static_cast<std::size_t>(n)) CHECK(p.algo != ddl::broadcast_algorithm::scatter_allgather);
      }
      // Each candidate its own stamp.
      const ddl::tag base = ddl::detail::call_tag(
          3, ddl::detail::make_stamp(ddl::detail::call_kind::broadcast, ddl::dtype::float32, ddl::op::sum, bytes / 4, 0, 0, "auto"));
      for (std::size_t i = 0; i < c.size(); ++i)
        for (std::size_t j = 0; j < i; ++j)
          CHECK(ddl::detail::stamps_disagree(ddl::detail::with_plan_stamp(base, c[i]), ddl::detail::with_plan_stamp(base, c[j])));
    }
  }
  // 4 ranks, 256 KiB: all three are candidates (the case measured on 4 processes).
  CHECK(ddl::detail::tuning_candidates(262144, ddl::topology::uniform(4, 2e9, 20e-6), 4, 3.0, 4).size() == 3);
}

TEST_CASE("broadcast measured on in-process ranks: exact from every root through the trials, one algorithm on every rank") {
  failure_log log;
  for (int n : {2, 3, 4, 5}) {
    for (std::size_t count : {std::size_t{1}, std::size_t{3}, std::size_t{1000}, std::size_t{70001}}) {
      CAPTURE(n);
      CAPTURE(count);
      std::vector<std::string> chosen(static_cast<std::size_t>(n)), report(static_cast<std::size_t>(n));
      ddl::local_fabric::run(n, [&](ddl::local_transport& tr) {
        const int r = tr.rank();
        ddl::options o;
        o.tune_bytes = std::size_t{16} << 20;
        ddl::communicator<ddl::auto_strategy, ddl::local_transport> comm(tr, ddl::auto_strategy{}, o);
        std::vector<std::int32_t> v(count);
        for (int k = 0; k < ddl::detail::plan_tuner::most_calls + 3; ++k) {
          const int root = k % n;
          for (std::size_t i = 0; i < count; ++i)
            v[i] = r == root ? static_cast<std::int32_t>(i * 7 + static_cast<std::size_t>(k)) : -1;
          comm.broadcast(ddl::host_view(v), root);
          for (std::size_t i = 0; i < count; ++i)
            if (v[i] != static_cast<std::int32_t>(i * 7 + static_cast<std::size_t>(k))) {
              log.add("n=" + std::to_string(n) + " count " + std::to_string(count) + " rank " + std::to_string(r) +
                      " call " + std::to_string(k) + ": element " + std::to_string(i) + " is " + std::to_string(v[i]));
              break;
            }
        }
        chosen[static_cast<std::size_t>(r)] = comm.broadcast_plan_for(count * 4, ddl::dtype::int32).describe();
        report[static_cast<std::size_t>(r)] = comm.explain_broadcast();
      });
      for (const auto& s : chosen) CHECK(s == chosen[0]);
      const auto topo =
          ddl::topology::uniform(n, ddl::local_transport::default_bandwidth, ddl::local_transport::default_latency);
      ddl::broadcast_costs threads;  // the threads': copies at 1.5 B, direct with the root's buffer read in place
      ddl::local_fabric::run(1, [&](ddl::local_transport& one) { threads = ddl::broadcast_costs_of(one); });
      const bool choice = ddl::detail::tuning_candidates(count * 4, topo, 4, 3.0, 4, threads).size() > 1 &&
                          count * 4 >= ddl::detail::plan_tuner::copies_from_for(n);
      CAPTURE(report[0]);
      CHECK((report[0].find("# broadcast measured at " + std::to_string(count * 4) + " bytes:") != std::string::npos) ==
            choice);
    }
  }
  CHECK_MESSAGE(log.count() == 0, log.summary());

  // A forced algorithm is run as forced: nothing measured.
  ddl::local_fabric::run(4, [&](ddl::local_transport& tr) {
    ddl::options o;
    o.tune_bytes = std::size_t{16} << 20;
    o.broadcast = ddl::broadcast_algorithm::chain;
    ddl::communicator<ddl::auto_strategy, ddl::local_transport> comm(tr, ddl::auto_strategy{}, o);
    std::vector<float> v(70001, static_cast<float>(tr.rank()));
    for (int k = 0; k < ddl::detail::plan_tuner::most_calls + 1; ++k) comm.broadcast(ddl::host_view(v), 1);
    CHECK(v[70000] == 1.0f);
    CHECK(comm.explain_broadcast().empty());
    CHECK(comm.broadcast_plan_for(70001 * 4).algo == ddl::broadcast_algorithm::chain);
  });
}
