/* sink job rank size secs: receive and count items, print the first payload seen */
#include <ferry.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
	struct ferry_opts o={.job=argv[1],.rank=atoi(argv[2]),.size=atoi(argv[3]),.timeout_ms=30000};
	ferry_t*f;int r=ferry_open(&f,&o);
	if(r<0){printf("open: %s\n",ferry_last_error());return 1;}
	printf("sink %s rank %d open\n",o.job,o.rank);fflush(stdout);
	long n=0;double end=now()+atof(argv[4]);int shown=0;
	while(now()<end){struct ferry_item it[64];int k=ferry_recv(f,it,64,100);
		if(k<0){printf("recv: %d %s\n",k,ferry_last_error());fflush(stdout);if(k!=-EPIPE&&k!=-EHOSTDOWN)break;continue;}
		for(int i=0;i<k;i++){ if(!shown){printf("first item: src %u len %u bytes '%.8s'\n",it[i].src,it[i].len,(const char*)it[i].data);shown=1;} n++; }
		if(k>0) ferry_release(f);}
	printf("sink %s rank %d got %ld items\n",o.job,o.rank,n);return 0;}
