#include <sys/uio.h>
#include <unistd.h>
#include <sys/wait.h>
#include <cstdio>
#include <cstring>
#include <vector>
#include <chrono>
#include <cstdlib>
static double now(){return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();}
int main(){
  size_t S=64<<20; char* buf=(char*)aligned_alloc(1<<21,S); memset(buf,1,S);
  int p[2]; pipe(p);
  pid_t c=fork();
  if(c==0){ char x; read(p[0],&x,1); _exit(0);}  // child keeps buf
  for(size_t ch : {size_t(64<<10), size_t(256<<10), size_t(1<<20), size_t(4<<20)}){
    std::vector<char> scratch(ch); memset(scratch.data(),0,ch);
    for(int rep=0;rep<3;++rep){
      double t0=now();
      for(size_t o=0;o<S;o+=ch){ iovec l{scratch.data(),ch}, r{buf+o,ch}; if(process_vm_readv(c,&l,1,&r,1,0)!=(ssize_t)ch){perror("rv");return 1;} }
      double t1=now();
      for(size_t o=0;o<S;o+=ch) memcpy(scratch.data(),buf+o,ch);
      double t2=now();
      printf("chunk %7zu: cma %.2f GB/s  memcpy %.2f GB/s\n",ch,S/(t1-t0)/1e9,S/(t2-t1)/1e9);
    }
  }
  write(p[1],"x",1); wait(nullptr);
}
