/* stepper job rank size steps sleep_after_ms wait_timeout_ms: each step sends 1 item to every other rank, done, step_wait */
#include <ferry.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc,char**argv){
	struct ferry_opts o={.job=argv[1],.rank=atoi(argv[2]),.size=atoi(argv[3]),.timeout_ms=20000};
	int steps=atoi(argv[4]),sl=atoi(argv[5]),wt=atoi(argv[6]);ferry_t*f;
	int r=ferry_open(&f,&o);
	if(r<0){printf("rank %d open: %s\n",o.rank,ferry_last_error());return 1;}
	printf("rank %d open\n",o.rank);fflush(stdout);
	for(int s=1;s<=steps;s++){ if(s>1&&getenv("GAP_MS")) usleep(atoi(getenv("GAP_MS"))*1000);
		for(int d=0;d<o.size;d++) if(d!=o.rank){ while((r=ferry_send(f,d,0,"x",1))==-EAGAIN) usleep(100); }
		r=ferry_done(f); if(r<0) printf("rank %d done: %d %s\n",o.rank,r,ferry_last_error());
		r=ferry_step_wait(f,wt);
		printf("rank %d step %d: %d %s\n",o.rank,s,r,r<0?ferry_last_error():"");fflush(stdout);
		struct ferry_item it[16]; while(ferry_recv(f,it,16,0)>0) ferry_release(f);
	}
	usleep(sl*1000);
	printf("rank %d closing\n",o.rank);fflush(stdout);
	ferry_close(f);return 0;
}
