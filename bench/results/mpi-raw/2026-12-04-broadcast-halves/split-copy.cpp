// Two processes, one copy across them: the reader reading the whole of the root's buffer
// (process_vm_readv) against each copying part (the root process_vm_writev'ing the rest).
//   g++ -O2 -std=c++17 split-copy.cpp -o split-copy && ./split-copy BYTES READER_FRACTION [CALLS=2000]
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
struct shared { std::atomic<long> pub{0}, rdone{0}, wdone{0}; void* rootbuf; void* readbuf; pid_t root, reader; };
static void spin(std::atomic<long>& a, long v) { while (a.load(std::memory_order_acquire) < v) {} }
int main(int argc, char** argv) {
  size_t S = strtoull(argv[1], nullptr, 10); double frac = atof(argv[2]); int iters = argc > 3 ? atoi(argv[3]) : 2000;
  auto* sh = new (mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0)) shared;
  sh->root = getpid();
  pid_t child = fork();
  std::vector<char> buf(S, 1);
  size_t head = (size_t)(S * frac) / 64 * 64;
  if (child == 0) {
    sh->reader = getpid(); std::atomic_thread_fence(std::memory_order_seq_cst); sh->readbuf = buf.data();
    for (long i = 1; i <= iters; ++i) {
      spin(sh->pub, i);
      if (head) { iovec l{buf.data(), head}, r{sh->rootbuf, head}; if (process_vm_readv(sh->root, &l, 1, &r, 1, 0) != (ssize_t)head) { perror("readv"); exit(1);} }
      sh->rdone.store(i, std::memory_order_release);
      spin(sh->wdone, i);
    }
    if (buf[S-1] != 7) { fprintf(stderr, "wrong %d\n", buf[S-1]); }
    _exit(0);
  }
  sh->rootbuf = buf.data();
  while (!*(void* volatile*)&sh->readbuf) {} std::atomic_thread_fence(std::memory_order_seq_cst);
  std::memset(buf.data(), 7, S);
  std::vector<double> t;
  auto t0 = std::chrono::steady_clock::now();
  for (long i = 1; i <= iters; ++i) {
    sh->pub.store(i, std::memory_order_release);
    if (head < S) { iovec l{buf.data() + head, S - head}, r{(char*)sh->readbuf + head, S - head}; if (process_vm_writev(sh->reader, &l, 1, &r, 1, 0) != (ssize_t)(S-head)) { perror("writev"); exit(1);} }
    sh->wdone.store(i, std::memory_order_release);
    spin(sh->rdone, i);
  }
  auto t1 = std::chrono::steady_clock::now();
  waitpid(child, nullptr, 0);
  printf("S=%zu frac=%.2f: %.2f us/call\n", S, frac, std::chrono::duration<double, std::micro>(t1 - t0).count() / iters);
}
