#pragma once
// What ddl-train and ddl-train-libtorch share around their networks: their
// common flags, the epoch's shuffle and shard, the learning-rate schedule,
// the per-epoch statistics reduced over the ranks, their printout and CSV,
// and running one function on every rank (threads or MPI).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include <ddl.hpp>
#ifdef DDL_TRAIN_MPI
#include <ddl/mpi.hpp>
#endif
#ifdef DDL_TRAIN_UCX
#include <ddl/ucx.hpp>
#endif

#include "model.hpp"

namespace train {

/// The flags both trainers take.
struct run_flags {
  std::string data = "/usr/share/datasets/fashion-mnist", transport = "local", csv;
  int epochs = 10, batch = 64, ranks = 1, steps = 0, test_subset = 0;
  double lr = 0.05, momentum = 0.9, target_accuracy = -1;
  std::uint64_t seed = 1;

  /// Reads flag `a` (its value from `value()`) when it is one of these.
  template <class Value>
  bool take(const std::string& a, Value&& value) {
    if (a == "--epochs") epochs = std::stoi(value());
    else if (a == "--batch") batch = std::stoi(value());
    else if (a == "--lr") lr = std::stod(value());
    else if (a == "--momentum") momentum = std::stod(value());
    else if (a == "--seed") seed = std::stoull(value());
    else if (a == "--data") data = value();
    else if (a == "--ranks") ranks = std::stoi(value());
    else if (a == "--transport") transport = value();
    else if (a == "--steps") steps = std::stoi(value());
    else if (a == "--test-subset") test_subset = std::stoi(value());
    else if (a == "--csv") csv = value();
    else if (a == "--target-accuracy") target_accuracy = std::stod(value());
    else return false;
    return true;
  }
  /// What is wrong with the values read ("" when nothing is).
  std::string problem() const {
    if (transport != "local" && transport != "mpi" && transport != "ucx")
      return "unknown transport '" + transport + "' (local, mpi or ucx)";
    if (epochs < 1 || batch < 1 || ranks < 1 || steps < 0 || test_subset < 0) return "counts must be positive";
    if (!(lr > 0) || !(momentum >= 0 && momentum < 1)) return "--lr must be > 0 and --momentum in [0, 1)";
    return "";
  }
};

/// Reads `argv` into `s` (a `run_flags`): a flag `run_flags::take` does not
/// know goes to `extra(flag, value)`, which says whether it took it; then
/// `s.problem()`. `usage(message)` does not return ("help" for -h).
template <class Settings, class Extra, class Usage>
void parse_flags(int argc, char** argv, Settings& s, Extra&& extra, Usage&& usage) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage("flag " + a + " needs a value");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") usage("help");
    try {
      if (!s.take(a, value) && !extra(a, value)) usage("unknown flag '" + a + "'");
    } catch (const std::logic_error&) {
      usage("bad value for " + a);
    }
  }
  if (const std::string p = s.problem(); !p.empty()) usage(p);
}

/// One epoch, the same on every rank (reduced over them).
struct epoch_stats {
  int epoch;
  double wall, train_loss, test_accuracy, images_per_s, exposed_comm, epoch_time;
};

/// The epoch's order of the training set: the same on every rank.
inline void shuffle(std::vector<std::uint32_t>& order, std::uint64_t seed, int epoch) {
  std::iota(order.begin(), order.end(), 0u);
  rng r(seed * 1000003u + static_cast<std::uint64_t>(epoch));
  for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[r.next() % i]);
}

/// Cosine from `lr` down to 0 over the whole run.
inline double cosine_lr(double lr, int epoch, int step, int steps_per_epoch, int epochs) {
  const double progress = (static_cast<double>(epoch - 1) * steps_per_epoch + step) /
                          (static_cast<double>(epochs) * steps_per_epoch);
  return lr * 0.5 * (1 + std::cos(3.14159265358979323846 * progress));
}

/// Reduces one rank's epoch figures over the ranks (loss and exposed time
/// averaged, test counts summed, the slowest rank's time) and prints them on rank 0.
template <class Comm>
epoch_stats finish_epoch(Comm& comm, int epoch, double wall, double loss_mean, std::int64_t correct,
                         std::int64_t tested, double exposed, double epoch_time, double images) {
  std::int64_t counts[2] = {correct, tested};
  comm.all_reduce(ddl::host_view(counts, 2), ddl::op::sum);
  double avg[2] = {loss_mean, exposed};
  comm.all_reduce(ddl::host_view(avg, 2), ddl::op::avg);
  comm.all_reduce(ddl::host_view(&epoch_time, 1), ddl::op::max);
  const epoch_stats e{epoch, wall, avg[0], static_cast<double>(counts[0]) / static_cast<double>(counts[1]),
                      images / epoch_time, avg[1], epoch_time};
  if (comm.rank() == 0) {
    std::printf("epoch %2d  train loss %.4f  test accuracy %.2f%%  %8.0f images/s  exposed communication %.2f s "
                "of %.2f s\n",
                e.epoch, e.train_loss, 100 * e.test_accuracy, e.images_per_s, e.exposed_comm, e.epoch_time);
    std::fflush(stdout);
  }
  return e;
}

inline void write_csv(const std::string& path, const std::string& model, const std::string& transport, int ranks,
                      int batch, const std::vector<epoch_stats>& stats) {
  std::ofstream f(path);
  f << "model,transport,ranks,batch,epoch,wall_s,train_loss,test_accuracy,images_per_s,exposed_comm_s,epoch_s\n";
  for (const auto& e : stats)
    f << model << ',' << transport << ',' << ranks << ',' << batch << ',' << e.epoch << ',' << e.wall << ','
      << e.train_loss << ',' << e.test_accuracy << ',' << e.images_per_s << ',' << e.exposed_comm << ','
      << e.epoch_time << '\n';
  if (!f) throw std::runtime_error("cannot write " + path);
}

/// MPI for a run over MPI (`--transport mpi`); sets `ranks` to MPI's size.
inline std::unique_ptr<void, void (*)(void*)> start_mpi(const std::string& transport, int& argc, char**& argv,
                                                        int& ranks) {
  std::unique_ptr<void, void (*)(void*)> none(nullptr, [](void*) {});
  if (transport == "ucx") {  // processes started by ddl-run, torchrun, srun ...: the size from their variables
#ifdef DDL_TRAIN_UCX
    ranks = ddl::launch_from_env().size;
    return none;
#else
    throw std::runtime_error("built without UCX (install libucx-dev and reconfigure)");
#endif
  }
  if (transport != "mpi") return none;
#ifdef DDL_TRAIN_MPI
  auto* s = new ddl::mpi_session(argc, argv);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  return std::unique_ptr<void, void (*)(void*)>(s, [](void* p) { delete static_cast<ddl::mpi_session*>(p); });
#else
  (void)argc, (void)argv, (void)ranks;
  throw std::runtime_error("built without MPI (configure with DDL_ENABLE_MPI=ON)");
#endif
}

/// Runs `f(transport&)` on every rank: `ranks` threads, or this MPI or UCX process.
/// Returns what rank 0's call returned; `rank` is this process's rank.
template <class R, class F>
R on_ranks(const std::string& transport, int ranks, int& rank, F&& f) {
  R result{};
  rank = 0;
  if (transport == "local") {
    ddl::local_fabric::run(ranks, [&](ddl::local_transport& t) {
      R mine = f(t);
      if (t.rank() == 0) result = std::move(mine);
    });
    return result;
  }
#ifdef DDL_TRAIN_UCX
  if (transport == "ucx") {
    ddl::ucx_transport t;
    rank = t.rank();
    return f(t);
  }
#endif
#ifdef DDL_TRAIN_MPI
  ddl::mpi_transport t(MPI_COMM_WORLD);
  rank = t.rank();
  return f(t);
#else
  throw std::runtime_error("built without MPI");
#endif
}

}  // namespace train
