/* joinflood DIR SECS SIZE: connect, HELLO+JOIN(size), wait for ATTACHED (or error), close; repeat */
#include "../proto/ctl.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
	struct sockaddr_un sa={.sun_family=AF_UNIX};snprintf(sa.sun_path,sizeof sa.sun_path,"%s/ferryd.sock",argv[1]);
	double end=now()+atof(argv[2]);uint32_t size=(uint32_t)atol(argv[3]);long n=0,err=0;char name[32];
	while(now()<end){int fd=socket(AF_UNIX,SOCK_STREAM,0);
		if(connect(fd,(void*)&sa,sizeof sa)<0){close(fd);err++;continue;}
		uint8_t b[512];ssize_t l=ctl_encode_hello(b,sizeof b,CTL_ROLE_ENDPOINT);
		snprintf(name,sizeof name,"j%ld",n%8);
		l+=ctl_encode_join(b+l,sizeof b-l,name,0,size);
		send(fd,b,l,MSG_NOSIGNAL);
		char r[4096];recv(fd,r,sizeof r,0); /* ATTACHED or ERROR */
		close(fd);n++;}
	printf("cycles %ld (%.0f/s) errors %ld\n",n,n/atof(argv[2]),err);return 0;}
