/* big send job: rank 0 sends one 1 MiB item (bytes = i*7+1 pattern, header "HEAD") to rank 1 then _exit without close
   big recv job: rank 1 receives for 3 s, checks every item */
#include <ferry.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
	int send=!strcmp(argv[1],"send");size_t L=(size_t)atol(argv[3]);
	struct ferry_opts o={.job=argv[2],.rank=send?0:1,.size=2,.timeout_ms=20000};
	ferry_t*f;int r=ferry_open(&f,&o);if(r<0){printf("open: %s\n",ferry_last_error());return 1;}
	if(send){unsigned char*b=malloc(L);for(size_t i=0;i<L;i++)b[i]=(unsigned char)(i*7+1);
		while((r=ferry_send(f,1,0,b,L))==-EAGAIN) usleep(10);
		if(r<0) printf("send: %s\n",ferry_last_error());
		if(argc>4) usleep(atoi(argv[4]));
		_exit(0);}
	double end=now()+3;int n=0,bad=0;
	while(now()<end){struct ferry_item it[8];int k=ferry_recv(f,it,8,100);
		if(k<0){ if(k==-EPIPE||k==-EHOSTDOWN) {continue;} printf("recv %d %s\n",k,ferry_last_error());break;}
		for(int i=0;i<k;i++){n++;const unsigned char*d=it[i].data;int ok=it[i].len==L;
			for(size_t j=0;ok&&j<it[i].len;j++) if(d[j]!=(unsigned char)(j*7+1)) ok=0;
			if(!ok){bad++;printf("BAD item: len %u (expected %zu), first bytes %02x %02x\n",it[i].len,L,d[0],d[1]);}}
		if(k>0) ferry_release(f);}
	printf("recv: %d items, %d bad\n",n,bad);return 0;}
