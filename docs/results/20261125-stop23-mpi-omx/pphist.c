#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include "open-mx.h"
#define KEY 0x5e1f
static uint64_t now_ns(void){struct timespec ts;clock_gettime(CLOCK_MONOTONIC,&ts);return (uint64_t)ts.tv_sec*1000000000ull+ts.tv_nsec;}
static void die(const char*w,omx_return_t r){fprintf(stderr,"%s: %s\n",w,omx_strerror(r));exit(1);}
static void waitr(omx_endpoint_t e,omx_request_t*q){omx_status_t st;uint32_t d=0;while(!d){if(omx_test(e,q,&st,&d)!=OMX_SUCCESS)die("test",0);}}
static int cmp(const void*a,const void*b){uint64_t x=*(uint64_t*)a,y=*(uint64_t*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
 unsigned long N=strtoul(argv[1],0,0); size_t len=argc>2?strtoul(argv[2],0,0):0;
 pid_t pid=fork(); int me=pid==0?1:0;
 cpu_set_t c;CPU_ZERO(&c);CPU_SET(me,&c);sched_setaffinity(0,sizeof c,&c);
 omx_return_t r; if((r=omx_init())!=OMX_SUCCESS)die("init",r);
 uint64_t nic; omx_board_number_to_nic_id(0,&nic);
 omx_endpoint_t ep; if((r=omx_open_endpoint(0,me,KEY,NULL,0,&ep))!=OMX_SUCCESS)die("open",r);
 omx_endpoint_addr_t peer; 
 for(;;){ r=omx_connect(ep,nic,1-me,KEY,1000,&peer); if(r==OMX_SUCCESS)break; usleep(10000);}
 char*buf=calloc(1,len+1); uint64_t*t=calloc(N,8); unsigned long warm=N/10;
 for(unsigned long i=0;i<warm+N;i++){
  omx_request_t s,q; uint64_t t0=now_ns();
  if(me==0){ omx_isend(ep,buf,len,peer,1,NULL,&s); omx_irecv(ep,buf,len,1,~0ull,NULL,&q); waitr(ep,&q); waitr(ep,&s);}
  else { omx_irecv(ep,buf,len,1,~0ull,NULL,&q); waitr(ep,&q); omx_isend(ep,buf,len,peer,1,NULL,&s); waitr(ep,&s);}
  if(i>=warm) t[i-warm]=now_ns()-t0;
 }
 if(me==0){ double sum=0; for(unsigned long i=0;i<N;i++)sum+=t[i]; qsort(t,N,8,cmp);
  printf("mean %.3f p10 %.3f p50 %.3f p90 %.3f p99 %.3f p99.9 %.3f max %.1f us (half rtt)\n",sum/N/2000,t[N/10]/2000.,t[N/2]/2000.,t[N*9/10]/2000.,t[N*99/100]/2000.,t[N*999/1000]/2000.,t[N-1]/2000.);
  unsigned long over=0; double osum=0; for(unsigned long i=0;i<N;i++) if(t[i]>20000){over++;osum+=t[i];}
  printf("rtt>20us: %lu (%.3f%%), they add %.3f us to the mean half rtt\n",over,100.0*over/N,osum/N/2000);
  wait(NULL);}
 sleep(me?1:0); omx_close_endpoint(ep); omx_finalize(); return 0;}
