// ddl-train: data-parallel training on Fashion-MNIST in plain C++, the job
// ddl exists for. Each rank trains on its shard of every global batch;
// gradients are averaged through ddl's gradient buckets as the backward pass
// produces them (asynchronous all-reduce, overlapped with the rest of the
// backward pass); every rank starts from rank 0's weights (broadcast).
// Ranks are threads (--ranks N), MPI processes (--transport mpi under
// mpiexec) or processes over UCX (--transport ucx under ddl-run, torchrun ...).
//
//   ddl-train [--model mlp|cnn] [--epochs 10] [--batch 64] [--lr 0.05] [--momentum 0.9]
//             [--seed 1] [--data DIR] [--ranks N | --transport mpi|ucx] [--steps N]
//             [--test-subset N] [--csv FILE] [--plot PNG] [--loss-log FILE]
//             [--compare-with FILE] [--target-accuracy A]
//
// The learning rate decays from --lr to 0 along a cosine over the whole run.
// Exit 77 when the dataset is missing (CTest reports the test skipped).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include <ddl.hpp>

#include "fashion_mnist.hpp"
#include "loop.hpp"
#include "model.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

struct settings : train::run_flags {
  std::string model = "mlp", plot, loss_log, compare_with;
};

[[noreturn]] void usage(const std::string& error) {
  const bool quiet = error.empty() || error == "help";  // -h: the usage alone, on stderr as ever
  std::fprintf(stderr,
               "%s%susage: ddl-train [--model mlp|cnn] [--epochs N] [--batch GLOBAL] [--lr X] [--momentum X]\n"
               "                 [--seed N] [--data DIR] [--ranks N | --transport mpi|ucx] [--steps N per epoch]\n"
               "                 [--test-subset N] [--csv FILE] [--plot PNG] [--loss-log FILE]\n"
               "                 [--compare-with LOSS_LOG] [--target-accuracy A]\n",
               quiet ? "" : "ddl-train: ", quiet ? "" : (error + "\n").c_str());
  std::exit(error == "help" ? 0 : 2);
}

settings parse(int argc, char** argv) {
  settings s;
  train::parse_flags(
      argc, argv, s,
      [&](const std::string& a, auto&& value) {
        if (a == "--model") s.model = value();
        else if (a == "--plot") s.plot = value();
        else if (a == "--loss-log") s.loss_log = value();
        else if (a == "--compare-with") s.compare_with = value();
        else return false;
        return true;
      },
      usage);
  if (s.model != "mlp" && s.model != "cnn") usage("unknown model '" + s.model + "' (mlp or cnn)");
  return s;
}

using train::epoch_stats;

struct run_result {
  std::vector<epoch_stats> stats;  ///< per epoch, reduced over the ranks
  std::vector<double> losses;      ///< per step, the global batch's mean loss (with --loss-log/--compare-with)
};

// One rank's whole run.
template <class Transport>
run_result train_rank(Transport& t, const settings& s, const train::dataset& train_set,
                      const train::dataset& test_set) {
  run_result out;
  std::vector<double>& step_losses = out.losses;
  const int n = t.size(), r = t.rank();
  if (s.batch % n)
    throw ddl::invalid_argument("--batch " + std::to_string(s.batch) + " does not split evenly over " +
                                std::to_string(n) + " ranks");
  const int local_batch = s.batch / n;
  using comm_t = ddl::communicator<ddl::auto_strategy, Transport>;
  comm_t comm(t);

  auto net = s.model == "mlp" ? train::make_mlp(s.seed + static_cast<std::uint64_t>(r))
                              : train::make_cnn(s.seed + static_cast<std::uint64_t>(r));
  comm.broadcast(ddl::host_view(net->params), 0);  // everyone starts from rank 0's weights
  std::vector<float> velocity(net->params.size(), 0.0f);

  // Gradients in backward order: the last layer's first.
  ddl::bucketer<comm_t> buckets(comm, ddl::op::avg);
  std::vector<std::size_t> bucket_index(net->layout.size());
  for (std::size_t k = net->layout.size(); k-- > 0;)
    bucket_index[k] = buckets.add(ddl::host_view(net->g(k), net->layout[k].size));

  const std::size_t pixels = train_set.pixels();
  const int steps_per_epoch = std::min<int>(s.steps ? s.steps : INT32_MAX, static_cast<int>(train_set.size()) / s.batch);
  std::vector<float> x(static_cast<std::size_t>(local_batch) * pixels);
  std::vector<std::uint8_t> y(static_cast<std::size_t>(local_batch));
  std::vector<std::uint32_t> order(train_set.size());
  const auto start = clock_type::now();

  for (int epoch = 1; epoch <= s.epochs; ++epoch) {
    // The same shuffle on every rank; rank r takes slice r of each global batch.
    train::shuffle(order, s.seed, epoch);
    comm.barrier();
    const auto epoch_start = clock_type::now();
    double loss_sum = 0, exposed = 0;
    for (int step = 0; step < steps_per_epoch; ++step) {
      for (int b = 0; b < local_batch; ++b) {
        const std::uint32_t id = order[static_cast<std::size_t>(step) * s.batch + r * local_batch + b];
        std::copy_n(train_set.images.data() + id * pixels, pixels, x.data() + b * pixels);
        y[b] = train_set.labels[id];
      }
      // Backward hands each gradient to the bucketer as soon as it is done.
      double loss = net->train_batch(x.data(), y.data(), local_batch,
                                     [&](std::size_t k) { buckets.mark_ready(bucket_index[k]); });
      const auto wait_start = clock_type::now();
      buckets.wait_all();  // what is left of the reduction after the backward pass
      exposed += std::chrono::duration<double>(clock_type::now() - wait_start).count();
      // SGD with momentum on the averaged gradients (identical on every
      // rank), the learning rate following a cosine from --lr down to 0.
      // The model's arithmetic is float: the flags as floats, as ever.
      const float lr = static_cast<float>(
          train::cosine_lr(static_cast<float>(s.lr), epoch, step, steps_per_epoch, s.epochs));
      const float momentum = static_cast<float>(s.momentum);
      for (std::size_t i = 0; i < net->params.size(); ++i) {
        velocity[i] = momentum * velocity[i] + net->grads[i];
        net->params[i] -= lr * velocity[i];
      }
      loss /= local_batch;
      if (!s.loss_log.empty() || !s.compare_with.empty()) {
        comm.all_reduce(ddl::host_view(&loss, 1), ddl::op::avg);
        step_losses.push_back(loss);
      }
      loss_sum += loss;
    }
    const double epoch_time = std::chrono::duration<double>(clock_type::now() - epoch_start).count();
    // Test accuracy: each rank classifies its block of the test set.
    const std::size_t test_n = s.test_subset ? std::min<std::size_t>(s.test_subset, test_set.size()) : test_set.size();
    const ddl::block mine = ddl::block_of(test_n, n, r);
    std::int64_t correct = 0;
    for (std::size_t i = 0; i < mine.size; i += 256) {
      const int b = static_cast<int>(std::min<std::size_t>(256, mine.size - i));
      correct += net->correct(test_set.images.data() + (mine.offset + i) * pixels,
                              test_set.labels.data() + mine.offset + i, b);
    }
    out.stats.push_back(train::finish_epoch(comm, epoch, std::chrono::duration<double>(clock_type::now() - start).count(),
                                            loss_sum / steps_per_epoch, correct, static_cast<std::int64_t>(mine.size),
                                            exposed, epoch_time, static_cast<double>(steps_per_epoch) * s.batch));
  }
  return out;
}

void write_outputs(const settings& s, int ranks, const std::vector<epoch_stats>& stats,
                   const std::vector<double>& step_losses) {
  if (!s.csv.empty()) train::write_csv(s.csv, s.model, s.transport, ranks, s.batch, stats);
  if (!s.plot.empty()) {
    if (s.csv.empty()) throw std::runtime_error("--plot needs --csv (gnuplot reads it)");
    const std::string cmd = "gnuplot 2>&1";
    FILE* g = popen(cmd.c_str(), "w");
    if (!g || std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
      std::fprintf(stderr, "ddl-train: gnuplot not found; no plot written\n");
      if (g) pclose(g);
    } else {
      std::fprintf(g,
                   "set terminal pngcairo size 1200,450\nset output '%s'\nset datafile separator ','\n"
                   "set multiplot layout 1,2 title 'ddl-train %s, %d ranks (%s), global batch %d'\n"
                   "set xlabel 'epoch'\nset ylabel 'train loss'\nset grid\n"
                   "plot '%s' using 5:7 skip 1 with linespoints title 'train loss'\n"
                   "set ylabel 'test accuracy (%%)'\n"
                   "plot '%s' using 5:($8*100) skip 1 with linespoints title 'test accuracy'\nunset multiplot\n",
                   s.plot.c_str(), s.model.c_str(), ranks, s.transport.c_str(), s.batch, s.csv.c_str(), s.csv.c_str());
      pclose(g);
    }
  }
  if (!s.loss_log.empty()) {
    std::ofstream f(s.loss_log);
    f.precision(10);
    for (double l : step_losses) f << l << '\n';
    if (!f) throw std::runtime_error("cannot write " + s.loss_log);
  }
}

// The n-rank trajectory must be the 1-rank one up to float rounding.
int compare_losses(const std::string& reference, const std::vector<double>& mine) {
  std::ifstream f(reference);
  if (!f) {
    std::fprintf(stderr, "ddl-train: cannot read the reference loss log %s\n", reference.c_str());
    return 1;
  }
  std::vector<double> ref;
  for (double v; f >> v;) ref.push_back(v);
  if (ref.size() != mine.size()) {
    std::fprintf(stderr, "ddl-train: %zu steps here, %zu in %s\n", mine.size(), ref.size(), reference.c_str());
    return 1;
  }
  double worst = 0;
  std::size_t at = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    const double rel = std::abs(mine[i] - ref[i]) / std::max(1e-12, std::abs(ref[i]));
    if (rel > worst) worst = rel, at = i;
  }
  std::printf("loss trajectory vs %s: %zu steps, largest relative difference %.3g at step %zu; last loss %.8f vs %.8f\n",
              reference.c_str(), ref.size(), worst, at + 1, mine.back(), ref.back());
  if (worst > 1e-4) {
    std::printf("equivalence FAILED (limit 1e-4)\n");
    return 1;
  }
  std::printf("equivalence ok (limit 1e-4)\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  settings s = parse(argc, argv);
  train::dataset train_set, test_set;
  std::unique_ptr<void, void (*)(void*)> mpi(nullptr, [](void*) {});
  try {
    mpi = train::start_mpi(s.transport, argc, argv, s.ranks);
  } catch (const std::exception& e) {
    usage(e.what());
  }
  try {
    train_set = train::load_fashion_mnist(s.data, true);
    test_set = train::load_fashion_mnist(s.data, false);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddl-train: %s\n", e.what());
    return 77;
  }
  run_result result;
  int rank = 0;
  try {
    result = train::on_ranks<run_result>(s.transport, s.ranks, rank, [&](auto& t) {
      if (t.rank() == 0)
        std::printf("ddl-train: %s on Fashion-MNIST, %d rank(s) (%s), global batch %d, lr %g, momentum %g\n",
                    s.model.c_str(), t.size(), s.transport == "mpi" ? "MPI" : s.transport == "ucx" ? "UCX" : "threads", s.batch, s.lr, s.momentum);
      return train_rank(t, s, train_set, test_set);
    });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddl-train: %s\n", e.what());
    return 1;
  }
  const std::vector<epoch_stats>& stats = result.stats;
  const std::vector<double>& losses = result.losses;
  if (rank != 0) return 0;
  try {
    write_outputs(s, s.ranks, stats, losses);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddl-train: %s\n", e.what());
    return 1;
  }
  int rc = 0;
  if (!s.compare_with.empty()) rc |= compare_losses(s.compare_with, losses);
  if (s.target_accuracy >= 0) {
    const double acc = stats.back().test_accuracy;
    std::printf("final test accuracy %.2f%% (target %.2f%%): %s\n", 100 * acc, 100 * s.target_accuracy,
                acc >= s.target_accuracy ? "reached" : "MISSED");
    if (acc < s.target_accuracy) rc |= 1;
  }
  return rc;
}
