// ddl-bench: all-reduce bandwidth in the layout of nccl-tests, every
// strategy side by side with the memory-traffic floor of this machine,
// measured in the same run on the same buffers.
//
//   ddl-bench --ranks 8 -b 4K -e 256M -f 2 -n 20 -w 5 [-d float] [-o sum]
//             [--strategy ring|multi_ring|recursive_doubling|halving_doubling|auto|all]
//             [--dims 2x2x2] [--explain] [--transport local] [--csv] [-c 1]
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
#include <functional>
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

const char* const strategy_names[] = {"ring", "multi_ring", "recursive_doubling", "halving_doubling", "auto"};

struct settings {
  std::size_t min_bytes = 4096, max_bytes = 256u << 20;
  double factor = 2;
  int iters = 20, warmup = 5;
  bool check = true, csv = false, explain = false;
  int ranks = 4;
  std::string transport = "local", dims;
  std::vector<std::string> strategies{"ring"};
  ddl::dtype type = ddl::dtype::float32;
  ddl::op oper = ddl::op::sum;
  std::size_t chunk_bytes = 0;  // 0: the library default
};

[[noreturn]] void usage(const std::string& error) {
  std::fprintf(stderr,
               "ddl-bench: %s\n"
               "usage: ddl-bench [--transport local] [--ranks N]\n"
               "                 [--strategy ring|multi_ring|recursive_doubling|halving_doubling|auto|all[,...]]\n"
               "                 [--dims AxBx...] [--explain]\n"
               "                 [-b MIN] [-e MAX] [-f FACTOR] [-n ITERS] [-w WARMUP] [-c 0|1]\n"
               "                 [-d int32|int64|float|double|half|bfloat16] [-o sum|prod|min|max|avg]\n"
               "                 [--chunk BYTES] [--csv]\n"
               "sizes take K, M, G suffixes (powers of 1024); --dims is the multi_ring box and the\n"
               "extents of auto's topology (link costs: DDL_TOPOLOGY, else the transport's defaults)\n",
               error.c_str());
  std::exit(2);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t a = 0;
  for (;;) {
    const std::size_t b = s.find(sep, a);
    out.push_back(s.substr(a, b == std::string::npos ? std::string::npos : b - a));
    if (b == std::string::npos) return out;
    a = b + 1;
  }
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
      else if (a == "--strategy") s.strategies = split(value(), ',');
      else if (a == "--dims") s.dims = value();
      else if (a == "--explain") s.explain = true;
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
  if (s.strategies.size() == 1 && s.strategies[0] == "all") s.strategies.assign(std::begin(strategy_names), std::end(strategy_names));
  for (const auto& name : s.strategies)
    if (std::find(std::begin(strategy_names), std::end(strategy_names), name) == std::end(strategy_names))
      usage("unknown strategy '" + name + "' (available: ring, multi_ring, recursive_doubling, halving_doubling, auto, all)");
  if (s.ranks < 1) usage("--ranks must be at least 1");
  if (s.factor <= 1 && s.min_bytes != s.max_bytes) usage("-f must be > 1");
  if (s.iters < 1 || s.warmup < 0) usage("-n must be >= 1 and -w >= 0");
  if (s.max_bytes < s.min_bytes) usage("-e must be >= -b");
  return s;
}

// The topology auto plans with: DDL_TOPOLOGY, else --dims with the local
// transport's default link costs, else one level of all ranks.
ddl::topology bench_topology(const settings& s) {
  using L = ddl::default_link<ddl::local_transport>;
  ddl::topology fallback;
  if (!s.dims.empty()) {
    for (const auto& e : split(s.dims, 'x')) fallback.add(ddl::level{std::stoi(e), L::bandwidth, L::latency, 0});
  } else {
    fallback = ddl::topology::uniform(s.ranks, L::bandwidth, L::latency);
  }
  return ddl::topology::from_env(s.ranks, fallback);
}

ddl::dynamic_extents bench_box(const ddl::topology& t) {
  std::vector<int> e;
  for (std::size_t l = 0; l < t.count(); ++l) e.push_back(t[l].extent);
  return ddl::dynamic_extents(e.begin(), e.end());
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

struct result {
  double t_oop = 0, t_ip = 0;
  long wrong_oop = 0, wrong_ip = 0;
  std::string note;
};
struct row {
  std::size_t bytes = 0, count = 0;
  double floor_s = 0;
  std::vector<result> impls;
};

// One implementation as seen by a rank thread: a communicator behind two calls.
struct impl {
  std::string label;
  std::function<void(const std::byte*, std::byte*, std::size_t)> oop;
  std::function<void(std::byte*, std::size_t)> ip;
  std::function<std::string(std::size_t)> note;
};

template <class Strategy>
impl make_impl(std::string label, ddl::local_transport& t, Strategy st, const ddl::options& o, const settings& s) {
  auto comm = std::make_shared<ddl::communicator<Strategy, ddl::local_transport>>(t, std::move(st), o);
  const ddl::dtype dt = s.type;
  const ddl::op op = s.oper;
  impl m;
  m.label = std::move(label);
  m.oop = [comm, dt, op](const std::byte* in, std::byte* out, std::size_t n) {
    comm->all_reduce(ddl::const_buffer_view{in, n, dt, {}}, ddl::buffer_view{out, n, dt, {}}, op);
  };
  m.ip = [comm, dt, op](std::byte* buf, std::size_t n) { comm->all_reduce(ddl::buffer_view{buf, n, dt, {}}, op); };
  m.note = [comm](std::size_t bytes) -> std::string {
    if constexpr (std::is_same_v<Strategy, ddl::auto_strategy>) {
      const auto& strat = comm->strategy();
      return ddl::describe(strat.topo(), strat.choose(bytes));
    } else {
      (void)bytes;
      return "";
    }
  };
  return m;
}

std::vector<row> run(const settings& s, const ddl::topology& topo) {
  const std::size_t es = ddl::size_of(s.type);
  std::vector<std::size_t> sizes;
  for (double b = static_cast<double>(s.min_bytes); b <= static_cast<double>(s.max_bytes) * 1.0000001; b *= s.factor) {
    const std::size_t bytes = static_cast<std::size_t>(b) / es * es;
    if (bytes && (sizes.empty() || sizes.back() != bytes)) sizes.push_back(bytes);
    if (s.factor <= 1) break;
  }
  const std::size_t cap = sizes.empty() ? es : sizes.back();
  const std::size_t nimpl = s.strategies.size();
  std::vector<row> rows(sizes.size());
  for (auto& r : rows) r.impls.resize(nimpl);
  // Buffers are allocated once, touched once by their owning thread, and
  // reused by every size and strategy: first touch costs ~0.4 GB/s here.
  std::vector<std::unique_ptr<std::byte[]>> ins(s.ranks), outs(s.ranks);
  std::unique_ptr<std::byte[]> expected(new std::byte[cap]);
  ddl_test::thread_barrier bar(s.ranks);
  ddl::options opts = ddl::options::from_env();
  if (s.chunk_bytes) opts.chunk_bytes = s.chunk_bytes;
  std::mutex m;

  ddl::local_fabric::run(s.ranks, [&](ddl::local_transport& t) {
    const int r = t.rank(), n = t.size();
    ins[r].reset(new std::byte[cap]);
    outs[r].reset(new std::byte[cap]);
    std::memset(ins[r].get(), 0, cap);
    std::memset(outs[r].get(), 0, cap);
    std::byte* in = ins[r].get();
    std::byte* out = outs[r].get();
    std::vector<impl> impls;
    for (const auto& name : s.strategies) {
      if (name == "ring") impls.push_back(make_impl("ddl:ring", t, ddl::ring{}, opts, s));
      else if (name == "recursive_doubling") impls.push_back(make_impl("ddl:rec_doubling", t, ddl::recursive_doubling{}, opts, s));
      else if (name == "halving_doubling") impls.push_back(make_impl("ddl:halv_doubling", t, ddl::halving_doubling{}, opts, s));
      else if (name == "auto") impls.push_back(make_impl("ddl:auto", t, ddl::auto_strategy(topo), opts, s));
      else {
        const auto box = bench_box(topo);
        impls.push_back(make_impl("ddl:multi_ring", t, ddl::multi_ring<ddl::dynamic_extents>(box), opts, s));
        impls.back().note = [box](std::size_t) { return box.str(); };
      }
    }

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
          for (std::size_t i = mine.offset; i < mine.offset + mine.size; ++i) E[i] = ddl_test::expected_value<T>(s.oper, n, i);
        auto count_wrong = [&] {
          long w = 0;
          if (s.check)
            for (std::size_t i = 0; i < count; ++i) w += !ddl_test::same_bits(O[i], E[i]);
          return w;
        };
        auto nothing = [] {};
        const double floor_s = measure(nothing, [&] { std::memcpy(out, in, bytes); });
        bar.arrive_and_wait();  // expected[] complete
        for (std::size_t j = 0; j < impls.size(); ++j) {
          const double t_oop = measure(nothing, [&] { impls[j].oop(in, out, count); });
          const long w_oop = count_wrong();
          const double t_ip = measure([&] { std::memcpy(out, in, bytes); }, [&] { impls[j].ip(out, count); });
          const long w_ip = count_wrong();
          std::lock_guard<std::mutex> lock(m);
          row& rw = rows[k];
          result& res = rw.impls[j];
          rw.bytes = bytes;
          rw.count = count;
          if (r == 0) {
            rw.floor_s = floor_s;
            res.t_oop = t_oop;
            res.t_ip = t_ip;
            res.note = impls[j].note(bytes);
          }
          res.wrong_oop += w_oop;
          res.wrong_ip += w_ip;
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
  ddl::topology topo;
  try {
    topo = bench_topology(s);
    if (s.explain) {
      for (double b = static_cast<double>(s.min_bytes); b <= static_cast<double>(s.max_bytes) * 1.0000001; b *= s.factor) {
        std::printf("%s\n", ddl::explain(topo, b).c_str());
        if (s.factor <= 1) break;
      }
    }
    rows = run(s, topo);
  } catch (const ddl::error& e) {
    std::fprintf(stderr, "ddl-bench: %s\n", e.what());
    return 1;
  } catch (const std::invalid_argument&) {
    std::fprintf(stderr, "ddl-bench: --dims must look like 2x2x2\n");
    return 2;
  }
  const int n = s.ranks;
  const double bus = n > 1 ? 2.0 * (n - 1) / n : 0.0;
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  long wrong_total = 0;
  auto wrong_str = [&](long w) { return s.check ? std::to_string(w) : std::string("N/A"); };
  std::vector<std::string> labels;
  for (const auto& name : s.strategies)
    labels.push_back(name == "recursive_doubling" ? "ddl:rec_doubling"
                     : name == "halving_doubling" ? "ddl:halv_doubling" : "ddl:" + name);

  if (s.csv) {
    std::printf("size,count,type,redop,impl,placement,time_us,algbw_GBps,busbw_GBps,wrong,floor_us,floor_eff,ranks,transport,note\n");
    for (const row& rw : rows) {
      std::printf("%zu,%zu,%s,%s,floor:copy,-,%.3f,%.4f,%.4f,,%.3f,1.0000,%d,%s,\n", rw.bytes, rw.count,
                  ddl::name_of(s.type), ddl::name_of(s.oper), rw.floor_s * 1e6, rw.bytes / rw.floor_s / 1e9,
                  rw.bytes / rw.floor_s / 1e9 * bus, rw.floor_s * 1e6, n, s.transport.c_str());
      for (std::size_t j = 0; j < rw.impls.size(); ++j)
        for (int p = 0; p < 2; ++p) {
          const result& res = rw.impls[j];
          const double t = p ? res.t_ip : res.t_oop;
          const long w = p ? res.wrong_ip : res.wrong_oop;
          wrong_total += w;
          std::printf("%zu,%zu,%s,%s,%s,%s,%.3f,%.4f,%.4f,%s,%.3f,%.4f,%d,%s,%s\n", rw.bytes, rw.count,
                      ddl::name_of(s.type), ddl::name_of(s.oper), labels[j].c_str(), p ? "in-place" : "out-of-place",
                      t * 1e6, rw.bytes / t / 1e9, rw.bytes / t / 1e9 * bus, wrong_str(w).c_str(), rw.floor_s * 1e6,
                      rw.floor_s / t, n, s.transport.c_str(), res.note.c_str());
        }
    }
  } else {
    std::string names;
    for (const auto& x : s.strategies) names += (names.empty() ? "" : ",") + x;
    std::printf("# ddl-bench all_reduce: transport %s, %d ranks, strategies %s, %d iterations (+%d warm-up), median time\n",
                s.transport.c_str(), n, names.c_str(), s.iters, s.warmup);
    std::printf("# topology (auto, multi_ring): %s\n", topo.str().c_str());
    std::printf("# machine: %s, %s, %ld cores; commit %s\n", host, cpu_model().c_str(), sysconf(_SC_NPROCESSORS_ONLN),
                DDL_BENCH_COMMIT);
    std::printf("# floor:copy = the same %d threads each copying their own buffer (2nS bytes of traffic, the least\n"
                "#   any all-reduce causes); floor_eff = t_floor / t (ring ideal: 2n/(5(n-1)) = %.0f%%)\n",
                n, n > 1 ? 100.0 * 2 * n / (5.0 * (n - 1)) : 100.0);
    const char* hfmt = "#%11s %12s %8s %6s %17s %10s %8s %8s %6s %6s %10s %8s %8s %6s %6s  %s\n";
    std::printf("#\n");
    std::printf(hfmt, "", "", "", "", "", "out-of-place", "", "", "", "", "in-place", "", "", "", "", "");
    std::printf(hfmt, "size", "count", "type", "redop", "impl", "time", "algbw", "busbw", "#wrong", "floor", "time",
                "algbw", "busbw", "#wrong", "floor", "plan");
    std::printf(hfmt, "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "_eff", "(us)", "(GB/s)",
                "(GB/s)", "", "_eff", "");
    for (const row& rw : rows) {
      std::printf(" %11zu %12zu %8s %6s %17s %10.1f %8.2f %8.2f %6s %6s\n", rw.bytes, rw.count, ddl::name_of(s.type),
                  ddl::name_of(s.oper), "floor:copy", rw.floor_s * 1e6, rw.bytes / rw.floor_s / 1e9,
                  rw.bytes / rw.floor_s / 1e9 * bus, "-", "1.00");
      for (std::size_t j = 0; j < rw.impls.size(); ++j) {
        const result& res = rw.impls[j];
        wrong_total += res.wrong_oop + res.wrong_ip;
        std::printf(" %11zu %12zu %8s %6s %17s %10.1f %8.2f %8.2f %6s %6.2f %10.1f %8.2f %8.2f %6s %6.2f  %s\n",
                    rw.bytes, rw.count, ddl::name_of(s.type), ddl::name_of(s.oper), labels[j].c_str(),
                    res.t_oop * 1e6, rw.bytes / res.t_oop / 1e9, rw.bytes / res.t_oop / 1e9 * bus,
                    wrong_str(res.wrong_oop).c_str(), rw.floor_s / res.t_oop, res.t_ip * 1e6,
                    rw.bytes / res.t_ip / 1e9, rw.bytes / res.t_ip / 1e9 * bus, wrong_str(res.wrong_ip).c_str(),
                    rw.floor_s / res.t_ip, res.note.c_str());
      }
    }
    std::printf("# out of bounds values : %ld %s\n", wrong_total, wrong_total ? "FAILED" : "OK");
  }
  if (wrong_total) {
    std::fprintf(stderr, "ddl-bench: %ld wrong results\n", wrong_total);
    return 1;
  }
  return 0;
}
