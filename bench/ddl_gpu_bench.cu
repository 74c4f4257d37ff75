// ddl-gpu-bench: the CUDA back-end against memory bandwidth, on one GPU.
//
//   ddl-gpu-bench reduce    [-b 1M] [-e 1G] [-f 4] [-n 20] [-d float] [-o sum]
//       the device reduction dst = a (op) b through both engines (ddl's
//       vectorised kernel and CCCL's cub::DeviceTransform) beside cudaMemcpy
//       device-to-device of the same size, all as memory traffic per second
//       (a reduction moves 3S bytes, a copy 2S); ratio = reduce_bw / copy_bw.
//       thrust::transform has no column: CCCL 3 runs it through the same
//       cub::DeviceTransform.
//   ddl-gpu-bench allreduce [--ranks 2,4,8] [--strategy ring|auto|one_shot|two_shot|recursive_doubling|halving_doubling] [-b 1M] [-e 1G] [-f 4] [-n 10]
//       all-reduce over cuda_peer_transport, all ranks on GPU 0, against the
//       memory-traffic floor 2 n S / M_hbm (M_hbm: the copy bandwidth measured
//       at that size in the same run); floor_eff = floor / time.
//   ddl-gpu-bench launch    [--ranks 2,4,8] [-n 200]
//       what a small all-reduce cannot go below when every rank's thread
//       launches its own kernel: the allreduce mode's loop (barrier, call,
//       stream synchronize, barrier) with the call an empty kernel, then the
//       same kernel between two host meetings of the ranks (as a flagged
//       call's), beside one_shot's and auto's 8-byte all-reduce in the same run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

#include <thrust/count.h>
#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/fill.h>

#include <ddl/cuda.hpp>

#include <ddl/testing.hpp>

#include "ddl_bench/sweep.hpp"

namespace {

struct settings : ddl_bench::sweep_flags {  // -b -e -f -n
  settings() { min_bytes = 1 << 20, max_bytes = std::size_t{1} << 30, factor = 4, iters = 20; }
  std::vector<int> ranks{2, 4, 8};
  std::string strategy = "ring";
  ddl::dtype type = ddl::dtype::float32;
  ddl::op oper = ddl::op::sum;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds per call of `fn` on `stream`, median of `iters` (after 2 warm-ups).
template <class F>
double time_on_stream(cudaStream_t stream, int iters, F&& fn) {
  cudaEvent_t a, b;
  DDL_CUDA_CHECK(cudaEventCreate(&a));
  DDL_CUDA_CHECK(cudaEventCreate(&b));
  std::vector<double> t;
  for (int i = 0; i < iters + 2; ++i) {
    DDL_CUDA_CHECK(cudaEventRecord(a, stream));
    fn();
    DDL_CUDA_CHECK(cudaEventRecord(b, stream));
    DDL_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    DDL_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    if (i >= 2) t.push_back(ms * 1e-3);
  }
  (void)cudaEventDestroy(a);
  (void)cudaEventDestroy(b);
  return median(t);
}

double copy_seconds(std::size_t bytes, int iters) {
  void *x = nullptr, *y = nullptr;
  DDL_CUDA_CHECK(cudaMalloc(&x, bytes));
  DDL_CUDA_CHECK(cudaMalloc(&y, bytes));
  DDL_CUDA_CHECK(cudaMemset(x, 1, bytes));
  const double t = time_on_stream(nullptr, iters, [&] {
    DDL_CUDA_CHECK(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, nullptr));
  });
  (void)cudaFree(x);
  (void)cudaFree(y);
  return t;
}

std::vector<std::size_t> sizes(const settings& s) { return s.sizes(ddl::size_of(s.type)); }

int reduce_mode(const settings& s) {
  const ddl::reduction r{s.type, s.oper};
  const std::size_t esize = ddl::size_of(s.type);
  std::printf("# ddl-gpu-bench reduce: %s %s, dst = a (op) b, engines kernel (ddl) and cub (CCCL"
              " cub::DeviceTransform) vs cudaMemcpy D2D; GB/s of memory traffic; median of %d\n",
              ddl::name_of(s.type), ddl::name_of(s.oper), s.iters);
  std::printf("# %12s %10s %10s %10s %10s %8s %10s %10s %8s %8s\n", "size(B)", "copy_us", "copy_GB/s", "kernel_us",
              "kernel_GB/s", "kernel/c", "cub_us", "cub_GB/s", "cub/c", "cub/kern");
  for (std::size_t bytes : sizes(s)) {
    const std::size_t n = bytes / esize;
    void *a = nullptr, *b = nullptr, *c = nullptr;
    DDL_CUDA_CHECK(cudaMalloc(&a, bytes));
    DDL_CUDA_CHECK(cudaMalloc(&b, bytes));
    DDL_CUDA_CHECK(cudaMalloc(&c, bytes));
    DDL_CUDA_CHECK(cudaMemset(a, 0, bytes));
    DDL_CUDA_CHECK(cudaMemset(b, 0, bytes));
    using ddl::cuda::reduce_engine;
    const double tk = time_on_stream(nullptr, s.iters, [&] { ddl::cuda::reduce(c, a, b, n, r, nullptr, reduce_engine::kernel); });
    const double tu = time_on_stream(nullptr, s.iters, [&] { ddl::cuda::reduce(c, a, b, n, r, nullptr, reduce_engine::cub); });
    const double tc = copy_seconds(bytes, s.iters);
    const double bw_c = 2.0 * bytes / tc / 1e9, bw_k = 3.0 * bytes / tk / 1e9, bw_u = 3.0 * bytes / tu / 1e9;
    std::printf("  %12zu %10.1f %10.1f %10.1f %10.1f %8.3f %10.1f %10.1f %8.3f %8.3f\n", bytes, tc * 1e6, bw_c, tk * 1e6,
                bw_k, bw_k / bw_c, tu * 1e6, bw_u, bw_u / bw_c, tk / tu);
    std::fflush(stdout);
    (void)cudaFree(a);
    (void)cudaFree(b);
    (void)cudaFree(c);
  }
  return 0;
}

template <class Strategy>
int allreduce_mode(const settings& s, const Strategy& strategy) {
  std::printf("# ddl-gpu-bench allreduce: cuda_peer_transport, every rank on GPU 0, float32 sum, in place;"
              " %s; median of %d\n", strategy.describe().c_str(), s.iters);
  std::printf("# floor = 2 n S / M_hbm, M_hbm = 2S / t(cudaMemcpy D2D of S) measured here\n");
  std::printf("# %5s %12s %12s %12s %12s %9s %6s  %s\n", "ranks", "size(B)", "time_us", "algbw_GB/s", "floor_us",
              "floor_eff", "wrong", "plan");
  for (int n : s.ranks) {
    for (std::size_t bytes : sizes(s)) {
      const std::size_t count = bytes / 4;
      const double m_hbm = 2.0 * bytes / copy_seconds(bytes, 5);
      const double floor_s = 2.0 * n * bytes / m_hbm;
      ddl::thread_barrier bar(n);
      std::vector<double> times;
      long wrong = 0;
      std::string plan = strategy.describe();  // auto: the plan it ran
      ddl::cuda_peer_fabric fab(n, std::vector<int>(static_cast<std::size_t>(n), 0));
      fab.run([&](ddl::cuda_peer_transport& t) {
        ddl::communicator<Strategy, ddl::cuda_peer_transport> comm(t, strategy);
        const auto on = thrust::cuda::par.on(t.stream());
        thrust::device_vector<float> d(count);
        for (int i = 0; i < s.iters + 2; ++i) {
          thrust::fill(on, d.begin(), d.end(), 1.0f);  // returns when the fill is done
          bar.arrive_and_wait();
          const auto t0 = std::chrono::steady_clock::now();
          comm.all_reduce(ddl::device_view(thrust::raw_pointer_cast(d.data()), count, 0, t.stream()), ddl::op::sum);
          DDL_CUDA_CHECK(cudaStreamSynchronize(t.stream()));
          bar.arrive_and_wait();
          const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          if (t.rank() == 0 && i >= 2) times.push_back(dt);
        }
        const long w = static_cast<long>(count) - static_cast<long>(thrust::count(on, d.begin(), d.end(), float(n)));
        if (t.rank() == 0) {
          wrong = w;
          if constexpr (std::is_same_v<Strategy, ddl::auto_strategy>)
            plan = ddl::describe(comm.strategy().topo(), comm.strategy().running(bytes, true));
        }
      });
      const double tm = median(times);
      std::printf("  %5d %12zu %12.1f %12.2f %12.1f %9.3f %6ld  %s\n", n, bytes, tm * 1e6, bytes / tm / 1e9,
                  floor_s * 1e6, floor_s / tm, wrong, plan.c_str());
      std::fflush(stdout);
    }
  }
  return 0;
}

__global__ void empty_kernel() {}

// Seconds per iteration of allreduce_mode's loop on n ranks, median of
// `iters`: each rank calls `make(t)` once, then the callable it returns once
// per sample.
template <class Make>
double rank_loop_seconds(int n, int iters, Make&& make) {
  ddl::thread_barrier bar(n);
  std::vector<double> times;
  ddl::cuda_peer_fabric fab(n, std::vector<int>(static_cast<std::size_t>(n), 0));
  fab.run([&](ddl::cuda_peer_transport& t) {
    auto call = make(t);
    for (int i = 0; i < iters + 2; ++i) {
      bar.arrive_and_wait();
      const auto t0 = std::chrono::steady_clock::now();
      call();
      DDL_CUDA_CHECK(cudaStreamSynchronize(t.stream()));
      bar.arrive_and_wait();
      const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (t.rank() == 0 && i >= 2) times.push_back(dt);
    }
  });
  return median(times);
}

int launch_mode(const settings& s) {
  std::printf("# ddl-gpu-bench launch: every rank on GPU 0, its own thread and stream; a sample is barrier,"
              " call, cudaStreamSynchronize, barrier; median of %d, us\n", s.iters);
  std::printf("# %5s %12s %12s %12s %12s\n", "ranks", "empty", "meet_empty", "one_shot_8B", "auto_8B");
  for (int n : s.ranks) {
    const double empty = rank_loop_seconds(n, s.iters, [](ddl::cuda_peer_transport& t) {
      return [&t] {
        empty_kernel<<<1, 32, 0, t.stream()>>>();
        DDL_CUDA_CHECK(cudaGetLastError());
      };
    });
    ddl::thread_barrier meet(n);
    const double meet_empty = rank_loop_seconds(n, s.iters, [&](ddl::cuda_peer_transport& t) {
      return [&] {
        meet.arrive_and_wait();
        empty_kernel<<<1, 32, 0, t.stream()>>>();
        DDL_CUDA_CHECK(cudaGetLastError());
        meet.arrive_and_wait();
      };
    });
    float* d = nullptr;  // two floats per rank
    DDL_CUDA_CHECK(cudaMalloc(&d, sizeof(float) * 2 * static_cast<std::size_t>(n)));
    auto eight_bytes = [&](auto strategy) {
      using comm_t = ddl::communicator<decltype(strategy), ddl::cuda_peer_transport>;
      return rank_loop_seconds(n, s.iters, [&](ddl::cuda_peer_transport& t) {
        return [&t, comm = std::make_shared<comm_t>(t, strategy), v = ddl::device_view(d + 2 * t.rank(), 2, 0, t.stream())] {
          comm->all_reduce(v, ddl::op::sum);
        };
      });
    };
    const double one = eight_bytes(ddl::one_shot{});
    const double aut = eight_bytes(ddl::auto_strategy{});
    (void)cudaFree(d);
    std::printf("  %5d %12.1f %12.1f %12.1f %12.1f\n", n, empty * 1e6, meet_empty * 1e6, one * 1e6, aut * 1e6);
    std::fflush(stdout);
  }
  return 0;
}

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "ddl-gpu-bench: %s\nusage: ddl-gpu-bench reduce|allreduce|launch [-b N] [-e N] [-f F] [-n ITERS]"
                       " [--ranks 2,4,8] [--strategy ring|auto|one_shot|two_shot|recursive_doubling|halving_doubling] [-d DTYPE] [-o OP]\n", why.c_str());
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) usage("needs a mode");
  const std::string mode = argv[1];
  settings s;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) usage(a + " needs a value");
    const std::string v = argv[++i];
    try {
      if (s.take(a, v)) continue;
      if (a == "--strategy") s.strategy = v;
      else if (a == "-d") s.type = ddl::parse_dtype(v);
      else if (a == "-o") s.oper = ddl::parse_op(v);
      else if (a == "--ranks") {
        s.ranks.clear();
        for (std::size_t p = 0; p < v.size();) {
          const std::size_t q = v.find(',', p);
          s.ranks.push_back(std::stoi(v.substr(p, q - p)));
          p = q == std::string::npos ? v.size() : q + 1;
        }
      } else usage("unknown flag '" + a + "'");
    } catch (const std::exception& e) {
      usage(e.what());
    }
  }
  if (const std::string p = s.problem(8); !p.empty()) usage(p);
  if (ddl::cuda::device_count() == 0) {
    std::puts("skipped: no CUDA device");
    return 77;
  }
  try {
    if (mode == "reduce") return reduce_mode(s);
    if (mode == "launch") return launch_mode(s);
    if (mode == "allreduce") {
      if (s.strategy == "ring") return allreduce_mode(s, ddl::ring{});
      if (s.strategy == "auto") return allreduce_mode(s, ddl::auto_strategy{});
      if (s.strategy == "one_shot") return allreduce_mode(s, ddl::one_shot{});
      if (s.strategy == "two_shot") return allreduce_mode(s, ddl::two_shot{});
      if (s.strategy == "recursive_doubling") return allreduce_mode(s, ddl::recursive_doubling{});
      if (s.strategy == "halving_doubling") return allreduce_mode(s, ddl::halving_doubling{});
      usage("unknown strategy '" + s.strategy + "'");
    }
    usage("unknown mode '" + mode + "'");
  } catch (const ddl::error& e) {
    std::fprintf(stderr, "ddl-gpu-bench: %s\n", e.what());
    return 1;
  }
}
