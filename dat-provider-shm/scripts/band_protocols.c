// Which protocol a 4 KiB ping-pong between two processes should use, in each of the host's
// bands (BENCHMARKS.md, "Session 9, 4 KiB"). Two processes (fork) hand a message back and
// forth through shared memory, a sequence flag per direction (release store, acquire spin),
// the same 20 000 round trips per protocol, all protocols back to back (about a second in
// all, so they usually share the host's band), each round trip timed; printed: p10/p50 of
// the half round trip in us.
//   8B-pause, 8B-nopause   8 bytes copied in and out, the spin with or without `pause`
//   4K-ring                4 KiB through a ring of 64 slots of 8 KiB (the provider's layout)
//   4K-ring-nopause        the same, spinning without `pause`
//   4K-single              4 KiB through one buffer per direction, reused (libfabric shm's
//                          inject buffer, datperf's raw-shm-spin)
//   4K-cma                 no payload in shared memory: the receiver pulls the 4 KiB from
//                          the sender's private buffer with process_vm_readv (one copy)
//   4K-ring-nt, 4K-single-nt  the sender fills the slot with non-temporal stores
// Build and run: cc -O2 -march=native -o band band_protocols.c && ./band 3
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <time.h>
#include <immintrin.h>

#define SLOTS 64
#define STRIDE 8192
#define ITERS 20000
struct ctl { volatile uint64_t f[2][8]; volatile uint64_t addr[2][8]; };
static struct ctl *C; static char *ring[2]; static char *single[2];
static char *src, *dst; static pid_t peer;
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
enum { P8, N8, RING_P, RING_N, SINGLE_P, CMA_P, RING_NT, SINGLE_NT, NV };
static const char *names[NV]={"8B-pause","8B-nopause","4K-ring","4K-ring-nopause","4K-single","4K-cma","4K-ring-nt","4K-single-nt"};
static uint64_t seq[2];
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
static void wait_flag(int side, uint64_t v, int pause){ while(__atomic_load_n(&C->f[side][0],__ATOMIC_ACQUIRE)<v){ if(pause) _mm_pause(); } }
static void send_msg(int me, int v, uint64_t n){
  size_t sz = (v==P8||v==N8)?8:4096;
  char *slot = (v==SINGLE_P||v==SINGLE_NT) ? single[me] : ring[me] + (n%SLOTS)*STRIDE;
  if (v==RING_NT||v==SINGLE_NT){ for(size_t o=0;o<sz;o+=64) _mm512_stream_si512((void*)(slot+o), _mm512_load_si512(src+o)); _mm_sfence(); }
  else if (v!=CMA_P) memcpy(slot, src, sz);
  __atomic_store_n(&C->f[me][0], ++seq[me], __ATOMIC_RELEASE);
}
static void recv_msg(int me, int v, uint64_t n){
  int other=1-me; size_t sz = (v==P8||v==N8)?8:4096;
  wait_flag(other, seq[other]+1, v!=N8 && v!=RING_N); seq[other]++;
  if (v==CMA_P){ struct iovec l={dst,4096}, r={(void*)C->addr[other][0],4096};
    if (process_vm_readv(peer,&l,1,&r,1,0)!=4096){perror("pvr");exit(1);} }
  else { char *slot = (v==SINGLE_P||v==SINGLE_NT) ? single[other] : ring[other] + (n%SLOTS)*STRIDE; memcpy(dst, slot, sz); }
}
int main(int argc,char**argv){
  int reps = argc>1?atoi(argv[1]):5;
  C = mmap(0,4096,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0);
  for(int i=0;i<2;i++){ ring[i]=mmap(0,SLOTS*STRIDE,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0); memset(ring[i],1,SLOTS*STRIDE);
    single[i]=mmap(0,8192,PROT_READ|PROT_WRITE,MAP_SHARED|MAP_ANONYMOUS,-1,0); memset(single[i],1,8192);}
  src=aligned_alloc(4096,8192); dst=aligned_alloc(4096,8192); memset(src,2,8192); memset(dst,3,8192);
  pid_t parent=getpid(); pid_t ch=fork(); int me = ch==0 ? 1 : 0; peer = me ? parent : ch;
  C->addr[me][0]=(uint64_t)src;
  __atomic_store_n(&C->f[me][1],1,__ATOMIC_RELEASE); while(!C->f[1-me][1]);
  for(int r=0;r<reps;r++){
    if(me==0) printf("%s", r==0?"":"\n");
    for(int v=0;v<NV;v++){
      static double lat[ITERS];
      for(uint64_t n=0;n<ITERS;n++){
        double t0 = me==0 ? now() : 0;
        if(me==0){ send_msg(0,v,n); recv_msg(0,v,n); lat[n]=(now()-t0)/2*1e6;} else { recv_msg(1,v,n); send_msg(1,v,n);} }
      if(me==0){ qsort(lat,ITERS,sizeof(double),cmp); printf("%s %.3f/%.3f  ", names[v], lat[ITERS/10], lat[ITERS/2]); fflush(stdout);}
    }
  }
  if(me==0){ printf("\n"); wait(NULL);} return 0;
}
