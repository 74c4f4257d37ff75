// ddl-train-libtorch: the Fashion-MNIST job in an existing framework. A
// LibTorch CNN trains data-parallel; its gradients are handed to ddl from
// autograd hooks as backward produces them (the way PyTorch DDP does it: a
// post-hook on each parameter's gradient accumulator), averaged by ddl's
// buckets over threads or MPI, and LibTorch's own SGD steps on the result.
//
// The parameters' .grad tensors are views into one flat buffer, a
// `ddl::shared_buffer`, so buckets reduce them in place with no copy (and
// MPI ranks of one machine read each other's gradients where they lie).
//
//   ddl-train-libtorch [--epochs 10] [--batch 64] [--lr 0.05] [--momentum 0.9] [--seed 1]
//                      [--data DIR] [--ranks N | --transport mpi] [--steps N] [--test-subset N]
//                      [--csv FILE] [--target-accuracy A]
// Exit 77 when the dataset is missing.
#include <torch/csrc/autograd/utils/lambda_post_hook.h>
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include <ddl.hpp>

#include "../train/fashion_mnist.hpp"
#include "../train/loop.hpp"  // the shuffle, schedule, statistics and rank runner ddl-train uses

namespace {

using clock_type = std::chrono::steady_clock;

using settings = train::run_flags;

[[noreturn]] void usage(const std::string& error) {
  const bool quiet = error.empty() || error == "help";  // -h: the usage alone, on stderr as ever
  std::fprintf(stderr,
               "%s%susage: ddl-train-libtorch [--epochs N] [--batch GLOBAL] [--lr X] [--momentum X] [--seed N]\n"
               "                          [--data DIR] [--ranks N | --transport mpi] [--steps N] [--test-subset N]\n"
               "                          [--csv FILE] [--target-accuracy A]\n",
               quiet ? "" : "ddl-train-libtorch: ", quiet ? "" : (error + "\n").c_str());
  std::exit(error == "help" ? 0 : 2);
}

settings parse(int argc, char** argv) {
  settings s;
  train::parse_flags(argc, argv, s, [](const std::string&, auto&&) { return false; }, usage);
  return s;
}

// conv 3x3 (1 -> 16) ReLU pool, conv 3x3 (16 -> 32) ReLU pool, linear 1568 -> 10
torch::nn::Sequential make_cnn() {
  namespace nn = torch::nn;
  return nn::Sequential(nn::Conv2d(nn::Conv2dOptions(1, 16, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
                        nn::Conv2d(nn::Conv2dOptions(16, 32, 3).padding(1)), nn::ReLU(), nn::MaxPool2d(2),
                        nn::Flatten(), nn::Linear(32 * 7 * 7, 10));
}

using train::epoch_stats;

template <class Transport>
std::vector<epoch_stats> train_rank(Transport& t, const settings& s, const train::dataset& tr, const train::dataset& te) {
  const int n = t.size(), r = t.rank();
  if (s.batch % n) throw ddl::invalid_argument("--batch does not split evenly over the ranks");
  const int local_batch = s.batch / n;
  torch::manual_seed(s.seed + static_cast<std::uint64_t>(r));
  auto net = make_cnn();
  using comm_t = ddl::communicator<ddl::auto_strategy, Transport>;
  comm_t comm(t);

  // Everyone starts from rank 0's weights; gradients live in one flat buffer.
  std::vector<torch::Tensor> params = net->parameters();
  std::size_t total = 0;
  for (auto& p : params) {
    torch::NoGradGuard no_grad;
    comm.broadcast(ddl::host_view(p.data_ptr<float>(), static_cast<std::size_t>(p.numel())), 0);
    total += static_cast<std::size_t>(p.numel());
  }
  ddl::shared_buffer flat_memory(total * sizeof(float));  // zeroed
  float* const flat = flat_memory.as<float>();
  ddl::bucketer<comm_t> buckets(comm, ddl::op::avg);
  std::vector<std::size_t> bucket_of(params.size());
  {
    std::size_t off = 0;
    std::vector<std::size_t> offsets;
    for (auto& p : params) {
      p.mutable_grad() = torch::from_blob(flat + off, p.sizes());  // .grad is a view into `flat`
      offsets.push_back(off);
      off += static_cast<std::size_t>(p.numel());
    }
    for (std::size_t k = params.size(); k-- > 0;)  // backward order
      bucket_of[k] = buckets.add(ddl::host_view(flat + offsets[k], static_cast<std::size_t>(params[k].numel())));
  }
  // DDP's hook: after autograd has accumulated a gradient into .grad.
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators;
  for (std::size_t k = 0; k < params.size(); ++k) {
    auto acc = torch::autograd::impl::grad_accumulator(params[k]);
    acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
        [&buckets, idx = bucket_of[k]](const torch::autograd::variable_list& outputs,
                                       const torch::autograd::variable_list&) {
          buckets.mark_ready(idx);
          return outputs;
        }));
    accumulators.push_back(std::move(acc));
  }
  torch::optim::SGD opt(params, torch::optim::SGDOptions(s.lr).momentum(s.momentum));

  const std::int64_t pixels = static_cast<std::int64_t>(tr.pixels());
  const int steps = std::min<int>(s.steps ? s.steps : INT32_MAX, static_cast<int>(tr.size()) / s.batch);
  std::vector<std::uint32_t> order(tr.size());
  std::vector<float> x(static_cast<std::size_t>(local_batch * pixels));
  std::vector<std::int64_t> y(static_cast<std::size_t>(local_batch));
  std::vector<epoch_stats> stats;
  const auto start = clock_type::now();
  for (int epoch = 1; epoch <= s.epochs; ++epoch) {
    train::shuffle(order, s.seed, epoch);
    comm.barrier();
    const auto epoch_start = clock_type::now();
    double loss_sum = 0, exposed = 0;
    net->train();
    for (int step = 0; step < steps; ++step) {
      for (int b = 0; b < local_batch; ++b) {
        const std::uint32_t id = order[static_cast<std::size_t>(step) * s.batch + r * local_batch + b];
        std::copy_n(tr.images.data() + id * pixels, pixels, x.data() + b * pixels);
        y[b] = tr.labels[id];
      }
      auto input = torch::from_blob(x.data(), {local_batch, 1, 28, 28});
      auto target = torch::from_blob(y.data(), {local_batch}, torch::kLong);
      std::fill(flat, flat + total, 0.0f);  // zero_grad, keeping the views
      auto loss = torch::nn::functional::cross_entropy(net->forward(input), target);
      loss.backward();  // the hooks hand each gradient to ddl as it is accumulated
      const auto wait_start = clock_type::now();
      buckets.wait_all();
      exposed += std::chrono::duration<double>(clock_type::now() - wait_start).count();
      static_cast<torch::optim::SGDOptions&>(opt.param_groups()[0].options())
          .lr(train::cosine_lr(s.lr, epoch, step, steps, s.epochs));
      opt.step();
      loss_sum += loss.item<double>();
    }
    const double epoch_time = std::chrono::duration<double>(clock_type::now() - epoch_start).count();
    net->eval();
    torch::NoGradGuard no_grad;
    const std::size_t test_n = s.test_subset ? std::min<std::size_t>(s.test_subset, te.size()) : te.size();
    const ddl::block mine = ddl::block_of(test_n, n, r);
    std::int64_t correct = 0;
    for (std::size_t i = 0; i < mine.size; i += 500) {
      const std::int64_t b = static_cast<std::int64_t>(std::min<std::size_t>(500, mine.size - i));
      auto input = torch::from_blob(const_cast<float*>(te.images.data()) + (mine.offset + i) * pixels, {b, 1, 28, 28});
      auto pred = net->forward(input).argmax(1);
      for (std::int64_t j = 0; j < b; ++j) correct += pred[j].item<std::int64_t>() == te.labels[mine.offset + i + j];
    }
    stats.push_back(train::finish_epoch(comm, epoch, std::chrono::duration<double>(clock_type::now() - start).count(),
                                        loss_sum / steps, correct, static_cast<std::int64_t>(mine.size), exposed,
                                        epoch_time, static_cast<double>(steps) * s.batch));
  }
  return stats;
}

}  // namespace

int main(int argc, char** argv) {
  settings s = parse(argc, argv);
  torch::set_num_threads(1);  // one core per rank: ranks are the parallelism
  std::unique_ptr<void, void (*)(void*)> mpi(nullptr, [](void*) {});
  try {
    mpi = train::start_mpi(s.transport, argc, argv, s.ranks);
  } catch (const std::exception& e) {
    usage(e.what());
  }
  train::dataset tr, te;
  try {
    tr = train::load_fashion_mnist(s.data, true);
    te = train::load_fashion_mnist(s.data, false);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddl-train-libtorch: %s\n", e.what());
    return 77;
  }
  std::vector<epoch_stats> stats;
  int rank = 0;
  try {
    stats = train::on_ranks<std::vector<epoch_stats>>(s.transport, s.ranks, rank, [&](auto& t) {
      if (t.rank() == 0)
        std::printf("ddl-train-libtorch: LibTorch %s CNN, %d rank(s) (%s), global batch %d\n", TORCH_VERSION,
                    t.size(), s.transport == "mpi" ? "MPI" : "threads", s.batch);
      return train_rank(t, s, tr, te);
    });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddl-train-libtorch: %s\n", e.what());
    return 1;
  }
  if (rank != 0) return 0;
  if (!s.csv.empty()) train::write_csv(s.csv, "libtorch-cnn", s.transport, s.ranks, s.batch, stats);
  if (s.target_accuracy >= 0) {
    const double acc = stats.back().test_accuracy;
    std::printf("final test accuracy %.2f%% (target %.2f%%): %s\n", 100 * acc, 100 * s.target_accuracy,
                acc >= s.target_accuracy ? "reached" : "MISSED");
    return acc >= s.target_accuracy ? 0 : 1;
  }
  return 0;
}
