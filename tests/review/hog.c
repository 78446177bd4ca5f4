/* hog: recv mode opens and never reads; send mode sends round-robin to ranks 1..S-1 */
#include <ferry.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
	if(argc<6){fprintf(stderr,"hog send|recv job rank size secs [len]\n");return 2;}
	const char*mode=argv[1];struct ferry_opts o={.job=argv[2],.rank=atoi(argv[3]),.size=atoi(argv[4]),.timeout_ms=30000};
	double secs=atof(argv[5]);int len=argc>6?atoi(argv[6]):200;
	ferry_t*f;int r=ferry_open(&f,&o);
	if(r<0){fprintf(stderr,"open: %s %s\n",ferry_strerror(r),ferry_last_error());return 1;}
	printf("%s rank %d open\n",mode,o.rank);fflush(stdout);
	if(getenv("DELAY_MS")) usleep(atoi(getenv("DELAY_MS"))*1000); double end=now()+secs;
	if(!strcmp(mode,"recv")){ while(now()<end) usleep(100000); printf("recv exit\n"); return 0;}
	char buf[65536];memset(buf,7,sizeof buf); memcpy(buf,"USER2000",8);long sent=0,eagain=0;uint32_t d=1;double last=now();
	while(now()<end){ r=ferry_send(f,d,0,buf,len);
		if(r==-EAGAIN){eagain++;usleep(50);continue;}
		if(r<0){printf("send err %d %s\n",r,ferry_last_error());break;}
		sent++; d=d+1; if(d>=(uint32_t)o.size) d=1;
		if(now()-last>1){printf("sent %ld eagain %ld\n",sent,eagain);fflush(stdout);last=now();}
	}
	printf("send done: sent %ld eagain %ld\n",sent,eagain);fflush(stdout);
	_exit(0);
}
