// A copy out of another process (process_vm_readv, cross-memory attach, as
// mpi_transport::read_peer and Open MPI's vader single copy do) against
// memcpy in one process, best of 6, bytes copied per second: S bytes into a
// buffer of S (as a gather), and in pieces into one cache-sized buffer (as
// two_shot's reduction reads them).
//   g++ -O2 cma_copy.cpp -o cma_copy && ./cma_copy MiB PIECE_KiB
#include <signal.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
int main(int argc, char** argv) {
  const size_t n = (argc > 1 ? atol(argv[1]) : 64) << 20;
  const size_t piece = argc > 2 ? atol(argv[2]) << 10 : n;
  std::vector<char> src(n, 1);
  int p[2];
  if (pipe(p) != 0) return 1;
  const pid_t c = fork();
  if (c == 0) {  // the peer: its own copy of src, written, then waits
    std::memset(src.data(), 2, n);
    char x = 1;
    if (write(p[1], &x, 1) != 1) _exit(1);
    pause();
    _exit(0);
  }
  char x;
  if (read(p[0], &x, 1) != 1) return 1;
  std::vector<char> dst(n, 0), small(piece, 0);
  auto best = [](auto f) {
    double b = 1e9;
    for (int r = 0; r < 6; r++) {
      auto t0 = std::chrono::steady_clock::now();
      f();
      b = std::min(b, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return b;
  };
  auto cma = [&](char* to, size_t step_to) {
    for (size_t o = 0; o < n; o += piece) {
      iovec l{to + o * step_to, piece}, r{src.data() + o, piece};
      if (process_vm_readv(c, &l, 1, &r, 1, 0) != static_cast<ssize_t>(piece)) {
        std::perror("process_vm_readv");
        std::exit(1);
      }
    }
  };
  const double cma_big = best([&] { cma(dst.data(), 1); });
  const double cma_small = best([&] { cma(small.data(), 0); });
  const double mem_big = best([&] { std::memcpy(dst.data(), src.data(), n); });
  const double mem_small = best([&] {
    for (size_t o = 0; o < n; o += piece) std::memcpy(small.data(), src.data() + o, piece);
  });
  std::printf("%4zu MiB in %6zu KiB pieces: into S: cma %.1f GB/s, memcpy %.1f; into one piece: cma %.1f, memcpy %.1f\n",
              n >> 20, piece >> 10, n / cma_big / 1e9, n / mem_big / 1e9, n / cma_small / 1e9, n / mem_small / 1e9);
  kill(c, SIGKILL);
  waitpid(c, nullptr, 0);
}
