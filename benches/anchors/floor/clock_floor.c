/* The floor under any event on this machine: what one clock read (clock_gettime through
 * the vDSO, and an unordered rdtsc), one CPU-number read (sched_getcpu) and one
 * compare-and-swap of a word nobody else touches cost. Each loop runs N times; the
 * figure is wall time over N. The sink keeps the compiler from dropping the reads.
 *
 * Then the floor under a disabled tracepoint, outside criterion (the fastest of REPS runs
 * of NL trips each): an empty loop (an empty asm statement keeps one trip per iteration),
 * a loop around a static key's disabled site (asm goto: a 5-byte NOP whose label, the
 * enabled branch, is never taken; nothing patches it), and a loop around ust's form of the
 * site (a load of a flag the compiler cannot cache, a test and a not-taken branch).
 *
 * Output (two lines, parsed by scripts/bench-compare.sh):
 *   floor clock_gettime_ns=.. rdtsc_ns=.. sched_getcpu_ns=.. cas_ns=.. (sink bit)
 *   floor empty_loop_ns=.. nop5_ns=.. load_test_branch_ns=.. (sink bit) */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <x86intrin.h>

#define N 20000000L
#define NL 50000000L
#define REPS 5

/* The enabled branch of the disabled-site loops: never run (the flag stays 0, the NOP is
 * never patched); out of line, as a tracepoint's event code is. */
__attribute__((noinline, cold)) static unsigned long on(long i)
{
	return (unsigned long)i * 3;
}

/* A static key's disabled site: the 5-byte NOP (nopl 0x0(%rax,%rax,1)) a jmp rel32 would
 * replace, with its address and the label's recorded in a table a patcher would walk. */
static inline __attribute__((always_inline)) int key_enabled(void)
{
	__asm__ goto("1: .byte 0x0f, 0x1f, 0x44, 0x00, 0x00\n\t"
		     ".pushsection ust_floor_jump_table, \"aR\"\n\t"
		     ".balign 4\n\t"
		     ".long 1b - ., %l[yes] - .\n\t"
		     ".popsection"
		     : : : : yes);
	return 0;
yes:
	return 1;
}

/* ust's disabled site reads its mask with a relaxed load: volatile is the C form of a
 * load the compiler may neither hoist nor drop. */
static volatile unsigned long mask;

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

	/* Sub-nanosecond loops: the fastest of REPS runs (interleaved, so a slow stretch of
	 * a shared machine hits the three alike), each NL trips. */
	double empty = 1e9, nop5 = 1e9, ltb = 1e9, d;
	for (int r = 0; r < REPS; r++) {
		t0 = now();
		for (long i = 0; i < NL; i++)
			__asm__ volatile("");
		d = now() - t0;
		empty = d < empty ? d : empty;

		t0 = now();
		for (long i = 0; i < NL; i++)
			if (key_enabled())
				sink += on(i);
		d = now() - t0;
		nop5 = d < nop5 ? d : nop5;

		t0 = now();
		for (long i = 0; i < NL; i++)
			if (__builtin_expect(mask != 0, 0))
				sink += on(i);
		d = now() - t0;
		ltb = d < ltb ? d : ltb;
	}

	printf("floor empty_loop_ns=%.2f nop5_ns=%.2f load_test_branch_ns=%.2f (%lu)\n",
	       empty * 1e9 / NL, nop5 * 1e9 / NL, ltb * 1e9 / NL, sink & 1);
	return 0;
}
