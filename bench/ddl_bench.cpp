// ddl-bench: all-reduce bandwidth in the layout of nccl-tests, with the
// memory-traffic floor of this machine measured in the same run.
//
//   ddl-bench --ranks 4 -b 4K -e 256M -f 2 -n 20 -w 5 [-d float] [-o sum]
//             [--strategy ring] [--transport local] [--csv] [-c 1]
//
// Columns follow nccl-tests: algbw = bytes / time, busbw = algbw * 2(n-1)/n.
// floor_eff = t_floor / t, where t_floor is the time the same n threads take
// to copy their own S-byte buffer (each reads and writes S bytes: the 2 n S
// bytes of traffic any all-reduce must at least cause). A ring moves
// 5 (n-1) S bytes, so its ideal floor_eff is 2n / (5(n-1)): 53% at n = 4.
#include <ddl.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <unistd.h>

#include "support.hpp"

#ifndef DDL_BENCH_COMMIT
#define DDL_BENCH_COMMIT "unknown"
#endif

namespace {

struct settings {
  std::size_t min_bytes = 4096, max_bytes = 256u << 20;
  double factor = 2;
  int iters = 20, warmup = 5;
  bool check = true, csv = false;
  int ranks = 4;
  std::string transport = "local", strategy = "ring";
  ddl::dtype type = ddl::dtype::float32;
  ddl::op oper = ddl::op::sum;
  std::size_t chunk_bytes = 0;  // 0: the library default
};

[[noreturn]] void usage(const std::string& error) {
  std::fprintf(stderr,
               "ddl-bench: %s\n"
               "usage: ddl-bench [--transport local] [--ranks N] [--strategy ring]\n"
               "                 [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP] [-c 0|1]\n"
               "                 [-d int32|int64|float|double|half|bfloat16] [-o sum|prod|min|max|avg]\n"
               "                 [--chunk BYTES] [--csv]\n"
               "sizes take K, M, G suffixes (powers of 1024)\n",
               error.c_str());
  std::exit(2);
}

settings parse(int argc, char** argv) {
  settings s;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage("flag " + a + " needs a value");
      return argv[++i];
    };
    try {
      if (a == "-b") s.min_bytes = ddl::detail::parse_bytes("-b", value());
      else if (a == "-e") s.max_bytes = ddl::detail::parse_bytes("-e", value());
      else if (a == "-f") s.factor = std::stod(value());
      else if (a == "-n") s.iters = std::stoi(value());
      else if (a == "-w") s.warmup = std::stoi(value());
      else if (a == "-c") s.check = std::stoi(value()) != 0;
      else if (a == "-d") s.type = ddl::parse_dtype(value());
      else if (a == "-o") s.oper = ddl::parse_op(value());
      else if (a == "--ranks") s.ranks = std::stoi(value());
      else if (a == "--transport") s.transport = value();
      else if (a == "--strategy") s.strategy = value();
      else if (a == "--chunk") s.chunk_bytes = ddl::detail::parse_bytes("--chunk", value());
      else if (a == "--csv") s.csv = true;
      else if (a == "-h" || a == "--help") usage("help");
      else usage("unknown flag '" + a + "'");
    } catch (const std::invalid_argument&) {
      usage("bad value for " + a);
    } catch (const ddl::error& e) {
      usage(e.what());
    }
  }
  if (s.transport != "local") usage("unknown transport '" + s.transport + "' (available: local)");
  if (s.strategy != "ring") usage("unknown strategy '" + s.strategy + "' (available: ring)");
  if (s.ranks < 1) usage("--ranks must be at least 1");
  if (s.factor <= 1 && s.min_bytes != s.max_bytes) usage("-f must be > 1");
  if (s.iters < 1 || s.warmup < 0) usage("-n must be >= 1 and -w >= 0");
  if (s.max_bytes < s.min_bytes) usage("-e must be >= -b");
  return s;
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown cpu";
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

struct row {
  std::size_t bytes = 0, count = 0;
  double floor_s = 0, t_oop = 0, t_ip = 0;
  long wrong_oop = -1, wrong_ip = -1;
};

template <class Strategy>
std::vector<row> run(const settings& s) {
  const std::size_t es = ddl::size_of(s.type);
  std::vector<std::size_t> sizes;
  for (double b = static_cast<double>(s.min_bytes); b <= static_cast<double>(s.max_bytes) * 1.0000001; b *= s.factor) {
    const std::size_t bytes = static_cast<std::size_t>(b) / es * es;
    if (bytes && (sizes.empty() || sizes.back() != bytes)) sizes.push_back(bytes);
    if (s.factor <= 1) break;
  }
  const std::size_t cap = sizes.empty() ? es : sizes.back();
  std::vector<row> rows(sizes.size());
  // Buffers are allocated once, touched once by their owning thread, and
  // reused by every size: first touch costs ~0.4 GB/s on these machines.
  std::vector<std::unique_ptr<std::byte[]>> ins(s.ranks), outs(s.ranks);
  std::unique_ptr<std::byte[]> expected(new std::byte[cap]);
  ddl_test::thread_barrier bar(s.ranks);
  ddl::options opts = ddl::options::from_env();
  if (s.chunk_bytes) opts.chunk_bytes = s.chunk_bytes;

  ddl::local_fabric::run(s.ranks, [&](ddl::local_transport& t) {
    const int r = t.rank(), n = t.size();
    ins[r].reset(new std::byte[cap]);
    outs[r].reset(new std::byte[cap]);
    std::memset(ins[r].get(), 0, cap);
    std::memset(outs[r].get(), 0, cap);
    ddl::communicator<Strategy, ddl::local_transport> comm(t, opts);
    comm.reserve_workspace(0);
    std::byte* in = ins[r].get();
    std::byte* out = outs[r].get();

    auto measure = [&](auto&& prepare, auto&& body) {
      std::vector<double> ts;
      for (int it = 0; it < s.warmup + s.iters; ++it) {
        prepare();
        bar.arrive_and_wait();
        const auto t0 = std::chrono::steady_clock::now();
        body();
        bar.arrive_and_wait();
        const auto t1 = std::chrono::steady_clock::now();
        if (it >= s.warmup) ts.push_back(std::chrono::duration<double>(t1 - t0).count());
      }
      return median(ts);
    };

    ddl::visit_dtype(s.type, [&](auto tag) {
      using T = decltype(tag);
      for (std::size_t k = 0; k < sizes.size(); ++k) {
        const std::size_t bytes = sizes[k], count = bytes / es;
        T* I = reinterpret_cast<T*>(in);
        T* O = reinterpret_cast<T*>(out);
        T* E = reinterpret_cast<T*>(expected.get());
        for (std::size_t i = 0; i < count; ++i) I[i] = ddl_test::to_element<T>(ddl_test::input_value(s.type, s.oper, r, i));
        const ddl::block mine = ddl::block_of(count, n, r);
        if (s.check)
          for (std::size_t i = mine.offset; i < mine.offset + mine.size; ++i)
            E[i] = ddl_test::expected_value<T>(s.oper, n, i);
        auto count_wrong = [&] {
          long w = 0;
          for (std::size_t i = 0; i < count; ++i) w += !ddl_test::same_bits(O[i], E[i]);
          return w;
        };
        auto nothing = [] {};
        const double floor_s = measure(nothing, [&] { std::memcpy(out, in, bytes); });
        const double t_oop = measure(nothing, [&] {
          comm.all_reduce(ddl::host_view(static_cast<const T*>(I), count), ddl::host_view(O, count), s.oper);
        });
        bar.arrive_and_wait();  // expected[] complete
        const long w_oop = s.check ? count_wrong() : -1;
        const double t_ip = measure([&] { std::memcpy(out, in, bytes); },
                                    [&] { comm.all_reduce(ddl::host_view(O, count), s.oper); });
        const long w_ip = s.check ? count_wrong() : -1;
        {
        static std::mutex m;
        std::lock_guard<std::mutex> lock(m);
        row& rw = rows[k];
        rw.bytes = bytes;
        rw.count = count;
        if (r == 0) {
          rw.floor_s = floor_s;
          rw.t_oop = t_oop;
          rw.t_ip = t_ip;
        }
        rw.wrong_oop = (rw.wrong_oop < 0 ? 0 : rw.wrong_oop) + std::max(0L, w_oop);
        rw.wrong_ip = (rw.wrong_ip < 0 ? 0 : rw.wrong_ip) + std::max(0L, w_ip);
        if (!s.check) rw.wrong_oop = rw.wrong_ip = -1;
        }
        bar.arrive_and_wait();  // nobody rewrites expected[] while others count
      }
    });
  });
  return rows;
}

}  // namespace

int main(int argc, char** argv) {
  const settings s = parse(argc, argv);
  std::vector<row> rows;
  try {
    rows = run<ddl::ring>(s);
  } catch (const ddl::error& e) {
    std::fprintf(stderr, "ddl-bench: %s\n", e.what());
    return 1;
  }
  const int n = s.ranks;
  const double bus = n > 1 ? 2.0 * (n - 1) / n : 0.0;
  const std::string impl = "ddl:" + s.strategy;
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  long wrong_total = 0;
  auto wrong_str = [](long w) { return w < 0 ? std::string("N/A") : std::to_string(w); };

  if (s.csv) {
    std::printf("size,count,type,redop,impl,placement,time_us,algbw_GBps,busbw_GBps,wrong,floor_us,floor_eff,ranks,transport\n");
    for (const row& rw : rows) {
      std::printf("%zu,%zu,%s,%s,floor:copy,-,%.3f,%.4f,%.4f,,%.3f,1.0000,%d,%s\n", rw.bytes, rw.count,
                  ddl::name_of(s.type), ddl::name_of(s.oper), rw.floor_s * 1e6, rw.bytes / rw.floor_s / 1e9,
                  rw.bytes / rw.floor_s / 1e9 * bus, rw.floor_s * 1e6, n, s.transport.c_str());
      for (int p = 0; p < 2; ++p) {
        const double t = p ? rw.t_ip : rw.t_oop;
        const long w = p ? rw.wrong_ip : rw.wrong_oop;
        wrong_total += std::max(0L, w);
        std::printf("%zu,%zu,%s,%s,%s,%s,%.3f,%.4f,%.4f,%s,%.3f,%.4f,%d,%s\n", rw.bytes, rw.count,
                    ddl::name_of(s.type), ddl::name_of(s.oper), impl.c_str(), p ? "in-place" : "out-of-place",
                    t * 1e6, rw.bytes / t / 1e9, rw.bytes / t / 1e9 * bus, wrong_str(w).c_str(), rw.floor_s * 1e6,
                    rw.floor_s / t, n, s.transport.c_str());
      }
    }
  } else {
    std::printf("# ddl-bench all_reduce: transport %s, %d ranks, strategy %s, %d iterations (+%d warm-up), median time\n",
                s.transport.c_str(), n, s.strategy.c_str(), s.iters, s.warmup);
    std::printf("# machine: %s, %s, %ld cores; commit %s\n", host, cpu_model().c_str(), sysconf(_SC_NPROCESSORS_ONLN),
                DDL_BENCH_COMMIT);
    std::printf("# floor:copy = the same %d threads each copying their own buffer (2nS bytes of traffic, the least\n"
                "#   any all-reduce causes); floor_eff = t_floor / t (ring ideal: 2n/(5(n-1)) = %.0f%%)\n",
                n, n > 1 ? 100.0 * 2 * n / (5.0 * (n - 1)) : 100.0);
    std::printf("#\n#%11s %12s %8s %6s %12s %10s %8s %8s %6s %6s %10s %8s %8s %6s %6s\n", "", "", "", "", "",
                "out-of-place", "", "", "", "", "in-place", "", "", "", "");
    std::printf("#%11s %12s %8s %6s %12s %10s %8s %8s %6s %6s %10s %8s %8s %6s %6s\n", "size", "count", "type",
                "redop", "impl", "time", "algbw", "busbw", "#wrong", "floor", "time", "algbw", "busbw", "#wrong",
                "floor");
    std::printf("#%11s %12s %8s %6s %12s %10s %8s %8s %6s %6s %10s %8s %8s %6s %6s\n", "(B)", "(elements)", "", "",
                "", "(us)", "(GB/s)", "(GB/s)", "", "_eff", "(us)", "(GB/s)", "(GB/s)", "", "_eff");
    for (const row& rw : rows) {
      std::printf(" %11zu %12zu %8s %6s %12s %10.1f %8.2f %8.2f %6s %6s %10s %8s %8s %6s %6s\n", rw.bytes, rw.count,
                  ddl::name_of(s.type), ddl::name_of(s.oper), "floor:copy", rw.floor_s * 1e6,
                  rw.bytes / rw.floor_s / 1e9, rw.bytes / rw.floor_s / 1e9 * bus, "-", "1.00", "", "", "", "", "");
      wrong_total += std::max(0L, rw.wrong_oop) + std::max(0L, rw.wrong_ip);
      std::printf(" %11zu %12zu %8s %6s %12s %10.1f %8.2f %8.2f %6s %6.2f %10.1f %8.2f %8.2f %6s %6.2f\n", rw.bytes,
                  rw.count, ddl::name_of(s.type), ddl::name_of(s.oper), impl.c_str(), rw.t_oop * 1e6,
                  rw.bytes / rw.t_oop / 1e9, rw.bytes / rw.t_oop / 1e9 * bus, wrong_str(rw.wrong_oop).c_str(),
                  rw.floor_s / rw.t_oop, rw.t_ip * 1e6, rw.bytes / rw.t_ip / 1e9, rw.bytes / rw.t_ip / 1e9 * bus,
                  wrong_str(rw.wrong_ip).c_str(), rw.floor_s / rw.t_ip);
    }
    std::printf("# out of bounds values : %ld %s\n", wrong_total, wrong_total ? "FAILED" : "OK");
  }
  if (wrong_total) {
    std::fprintf(stderr, "ddl-bench: %ld wrong results\n", wrong_total);
    return 1;
  }
  return 0;
}
