/* LTTng-UST reference: N events of `bench:ev {u64 id, i32 val}` per thread, T threads
 * (at most 64) started together. Prints the wall time per event per thread:
 *   lttng-ust threads=T events=N*T ns_per_event_per_thread=..
 * Run through run.sh, which sets up the session (or none, for the disabled cost). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "tp.h"

#define MAX_THREADS 64

static long n_events;

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static void *emit(void *arg)
{
	long tid = (long)arg;
	for (long i = 0; i < n_events; i++)
		lttng_ust_tracepoint(bench, ev, i, (int)tid);
	return NULL;
}

int main(int argc, char **argv)
{
	n_events = argc > 1 ? atol(argv[1]) : 10000000;
	int threads = argc > 2 ? atoi(argv[2]) : 1;
	pthread_t th[MAX_THREADS];
	if (n_events <= 0 || threads < 1 || threads > MAX_THREADS) {
		fprintf(stderr, "usage: %s [EVENTS_PER_THREAD] [THREADS (1..%d)]\n", argv[0], MAX_THREADS);
		return 2;
	}
	double t0 = now();
	for (long t = 0; t < threads; t++) {
		if (pthread_create(&th[t], NULL, emit, (void *)t) != 0) {
			perror("pthread_create");
			return 1;
		}
	}
	for (int t = 0; t < threads; t++)
		pthread_join(th[t], NULL);
	double dt = now() - t0;
	printf("lttng-ust threads=%d events=%ld ns_per_event_per_thread=%.1f\n",
	       threads, n_events * threads, dt * 1e9 / n_events);
	return 0;
}
