// ddl-run: starts the ranks of a ddl job on this machine without MPI.
//
//   ddl-run -n 4 [--keep-going] [--time-limit S] [--] program [args...]
//
// Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE and
// DDL_RENDEZVOUS=file://<a fresh directory>, as `ddl::ucx_transport` (and
// torchrun's workers) expect. The exit code is the first failing rank's
// (128 + the signal for one a signal ended); the other ranks are ended then,
// unless --keep-going. --time-limit ends them all after S seconds (code 124).
#include <ddl/rendezvous/spawn.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {
[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "ddl-run: %s\nusage: ddl-run -n RANKS [--keep-going] [--time-limit SECONDS] [--] program [args...]\n",
               why);
  std::exit(2);
}
}  // namespace

int main(int argc, char** argv) {
  int n = 0;
  ddl::spawn_options opt;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if ((a == "-n" || a == "--ranks") && i + 1 < argc) {
      char* end = nullptr;
      n = static_cast<int>(std::strtol(argv[++i], &end, 10));
      if (*end != '\0' || n < 1) usage("-n needs a positive number of ranks");
    } else if (a == "--keep-going") {
      opt.end_all_on_failure = false;
    } else if (a == "--time-limit" && i + 1 < argc) {
      opt.time_limit = std::chrono::duration<double>(std::atof(argv[++i]));
    } else if (a == "-h" || a == "--help") {
      usage("starts RANKS processes of program, told where to meet");
    } else if (!a.empty() && a[0] == '-') {
      usage(("unknown option " + a).c_str());
    } else {
      break;
    }
  }
  if (n < 1) usage("-n RANKS is required");
  if (i >= argc) usage("no program to run");
  try {
    return ddl::spawn_local(n, std::vector<std::string>(argv + i, argv + argc), opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ddl-run: %s\n", e.what());
    return 1;
  }
}
