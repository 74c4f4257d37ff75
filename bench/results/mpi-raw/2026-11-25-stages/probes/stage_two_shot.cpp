#include <mpi.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <unistd.h>
#include <vector>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <algorithm>
#include <chrono>
static double now(){return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();}
struct info { int64_t pid; int fd; };
int main(int argc,char**argv){
  MPI_Init(&argc,&argv);
  int r,n; MPI_Comm_rank(MPI_COMM_WORLD,&r); MPI_Comm_size(MPI_COMM_WORLD,&n);
  size_t bytes = argc>1? strtoull(argv[1],0,0):16<<20;
  size_t count = bytes/4;
  std::vector<float> buf(count), ref(count);
  int fd = memfd_create("ddl-stage", MFD_CLOEXEC); ftruncate(fd, bytes);
  float* mine=(float*)mmap(nullptr,bytes,PROT_READ|PROT_WRITE,MAP_SHARED,fd,0);
  memset(mine,0,bytes);
  info me{getpid(),fd}; std::vector<info> all(n);
  MPI_Allgather(&me,sizeof me,MPI_BYTE,all.data(),sizeof me,MPI_BYTE,MPI_COMM_WORLD);
  std::vector<float*> st(n);
  for(int p=0;p<n;++p){ if(p==r){st[p]=mine;continue;} char path[64]; snprintf(path,64,"/proc/%lld/fd/%d",(long long)all[p].pid,all[p].fd);
    int f=open(path,O_RDWR); if(f<0){perror(path);MPI_Abort(MPI_COMM_WORLD,1);} st[p]=(float*)mmap(nullptr,bytes,PROT_READ|PROT_WRITE,MAP_SHARED,f,0); close(f);}
  auto fill=[&]{ for(size_t i=0;i<count;++i) buf[i]=float((i*7+r)%13); };
  int iters=20; std::vector<double> tm, tc;
  size_t blk=count/n;
  auto B=[&](int p){return std::pair<size_t,size_t>(p*blk, p==n-1?count-p*blk:blk);};
  for(int it=0;it<iters+3;++it){
    fill(); MPI_Barrier(MPI_COMM_WORLD);
    double t0=now(); MPI_Allreduce(MPI_IN_PLACE,buf.data(),count,MPI_FLOAT,MPI_SUM,MPI_COMM_WORLD); double t1=now();
    if(it>=3) tm.push_back(t1-t0);
    ref=buf;
    fill(); MPI_Barrier(MPI_COMM_WORLD);
    t0=now();
    // copy in every block but mine
    for(int p=0;p<n;++p){ if(p==r) continue; auto [o,l]=B(p); memcpy(mine+o,buf.data()+o,l*4);}
    MPI_Barrier(MPI_COMM_WORLD);
    { auto [o,l]=B(r); float* d=buf.data()+o; float* s2=mine+o;
      const size_t CH=16384;
      for(size_t c0=0;c0<l;c0+=CH){ size_t c1=std::min(l,c0+CH);
        for(int p=0;p<n;++p){ if(p==r) continue; const float* a=st[p]+o; for(size_t i=c0;i<c1;++i) d[i]+=a[i]; }
        memcpy(s2+c0,d+c0,(c1-c0)*4);} }
    MPI_Barrier(MPI_COMM_WORLD);
    for(int p=0;p<n;++p){ if(p==r) continue; auto [o,l]=B(p); memcpy(buf.data()+o,st[p]+o,l*4);}
    MPI_Barrier(MPI_COMM_WORLD);
    t1=now(); if(it>=3) tc.push_back(t1-t0);
    if(it==iters+2){ size_t bad=0; for(size_t i=0;i<count;++i) if(buf[i]!=ref[i]) ++bad; if(bad) printf("rank %d: %zu wrong\n",r,bad);}
  }
  std::sort(tm.begin(),tm.end()); std::sort(tc.begin(),tc.end());
  if(r==0) printf("n=%d bytes=%zu  MPI_Allreduce in place %.1f us  shm two-shot %.1f us  ratio %.2f\n",n,bytes,tm[iters/2]*1e6,tc[iters/2]*1e6,tm[iters/2]/tc[iters/2]);
  MPI_Finalize();
}
