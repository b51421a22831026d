/* The floor under any event on this machine: what one clock read (clock_gettime through
 * the vDSO, and an unordered rdtsc), one CPU-number read (sched_getcpu) and one
 * compare-and-swap of a word nobody else touches cost. Each loop runs N times; the
 * figure is wall time over N. The sink keeps the compiler from dropping the reads.
 *
 * Output (one line, parsed by scripts/bench-compare.sh):
 *   floor clock_gettime_ns=.. rdtsc_ns=.. sched_getcpu_ns=.. cas_ns=.. (sink bit) */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <x86intrin.h>

#define N 20000000L

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void)
{
	struct timespec t;
	unsigned long sink = 0;
	_Atomic unsigned long word = 0;
	double t0, mono, tsc, cpu, cas;

	t0 = now();
	for (long i = 0; i < N; i++) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		sink += t.tv_nsec;
	}
	mono = now() - t0;

	t0 = now();
	for (long i = 0; i < N; i++)
		sink += __rdtsc();
	tsc = now() - t0;

	t0 = now();
	for (long i = 0; i < N; i++)
		sink += sched_getcpu();
	cpu = now() - t0;

	/* The ring buffer's reserve: a relaxed load, then a CAS moving the word forward by
	 * one event's size (24 bytes). */
	t0 = now();
	for (long i = 0; i < N; i++) {
		unsigned long old = atomic_load_explicit(&word, memory_order_relaxed);
		atomic_compare_exchange_strong(&word, &old, old + 24);
	}
	cas = now() - t0;

	printf("floor clock_gettime_ns=%.1f rdtsc_ns=%.1f sched_getcpu_ns=%.1f cas_ns=%.1f (%lu)\n",
	       mono * 1e9 / N, tsc * 1e9 / N, cpu * 1e9 / N, cas * 1e9 / N, sink & 1);
	return 0;
}
