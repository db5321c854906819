/*
 * The read side's fence chosen at run time, from C (rcuref_heavy_install,
 * rcuref_fence_mode). What it expects depends on the archive it is linked with
 * (rcuref_config.h beside it) and on its argument:
 *
 *   heavy_install install    feature auto-fence: a fence installed before the first
 *                            grace period makes the mode heavy, a second install and
 *                            a null one are refused, grace periods call the fence and
 *                            still wait for a reader of another thread;
 *   heavy_install decided    feature auto-fence: rcuref_fence_mode first decides the
 *                            mode full, and the install is then refused (EDECIDED);
 *   heavy_install gp-first   feature auto-fence: a grace period first, the same;
 *   heavy_install found      feature membarrier: the mode is found heavy, an install
 *                            is refused (EBUSY), grace periods still wait for a reader;
 *   heavy_install plain      without auto-fence: the install answers ENOTSUP (EINVAL
 *                            for a null fence), the mode is full, nothing else changes;
 *   heavy_install race       built with -DMUTANTS against an archive with auto-fence and
 *                            --cfg rcuref_mutants: a second install run between the
 *                            first's claim and its install (the review's race) is
 *                            refused only once the first's fence is in, the mode heavy;
 *   heavy_install race-old   the same with the first version's install: the control,
 *                            exits 3 when both installs are refused and the mode full.
 *
 * Each mode is one process: the mode is decided once per process. Exits 0 when every
 * check passes, 1 otherwise, 2 for a usage error or an archive of the wrong build (3:
 * race-old's verdict).
 */
#define _GNU_SOURCE
#include "rcuref.h"
#include "check.h"
#include "clock.h"
#include "membarrier_fence.h"
#include "rcuref_config.h" /* beside the archive this test is linked with */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void other_fence(void)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST); /* offered second: always refused */
}

static const rcuref_rcu *d;
static atomic_int inside;
static double unlocked_at;

/* A reader of another thread: enters, stays 50 ms, notes the time, unlocks. */
static void *reader(void *arg)
{
	(void)arg;
	rcuref_ctx r;
	if (rcuref_ctx_open(d, 1, 2, &r) != RCUREF_OK)
		abort();
	if (rcuref_read_lock(&r) != RCUREF_OK)
		abort();
	atomic_store(&inside, 1);
	struct timespec t = {0, 50 * 1000 * 1000};
	nanosleep(&t, NULL);
	unlocked_at = now_ms(); /* before the unlock, which the grace period acquires */
	if (rcuref_read_unlock(&r) != RCUREF_OK)
		abort();
	if (rcuref_ctx_close(&r) != RCUREF_OK)
		abort();
	return NULL;
}

/* A grace period with a reader of another thread inside ends after its unlock. */
static void waits_for_a_reader(rcuref_ctx *w)
{
	atomic_store(&inside, 0);
	unlocked_at = 0;
	pthread_t t;
	pthread_create(&t, NULL, reader, NULL);
	while (!atomic_load(&inside))
		;
	CHECK(rcuref_synchronize(w, NULL, NULL) == RCUREF_OK);
	double back = now_ms();
	CHECK(unlocked_at > 0 && back >= unlocked_at);
	pthread_join(t, NULL);
}

static int install(rcuref_ctx *w)
{
	CHECK(rcuref_heavy_install(NULL) == RCUREF_EINVAL);
	/* A section before the install (undecided: the full fence), and after it. */
	rcuref_ctx r;
	CHECK(rcuref_ctx_open(d, 1, 2, &r) == RCUREF_OK);
	CHECK(rcuref_read_lock(&r) == RCUREF_OK);
	CHECK(rcuref_heavy_install(membarrier_fence) == RCUREF_OK);
	CHECK(rcuref_read_unlock(&r) == RCUREF_OK);
	CHECK(rcuref_ctx_close(&r) == RCUREF_OK);
	CHECK(rcuref_heavy_install(membarrier_fence) == RCUREF_EBUSY);
	CHECK(rcuref_heavy_install(other_fence) == RCUREF_EBUSY);
	CHECK(rcuref_fence_mode() == RCUREF_FENCE_HEAVY);
	CHECK(atomic_load(&heavy_fences) == 0); /* nothing waited yet */
	CHECK(rcuref_synchronize(w, NULL, NULL) == RCUREF_OK);
	long one = atomic_load(&heavy_fences);
	CHECK(one >= 1); /* the installed fence, not another */
	waits_for_a_reader(w);
	CHECK(atomic_load(&heavy_fences) > one);
	CHECK(rcuref_heavy_install(other_fence) == RCUREF_EBUSY);
	CHECK(rcuref_fence_mode() == RCUREF_FENCE_HEAVY);
	printf("heavy_install: installed; %ld heavy fences for 2 grace periods\n",
	       atomic_load(&heavy_fences));
	return 0;
}

static int decided_first(rcuref_ctx *w, int by_grace_period)
{
	if (by_grace_period)
		CHECK(rcuref_synchronize(w, NULL, NULL) == RCUREF_OK);
	else
		CHECK(rcuref_fence_mode() == RCUREF_FENCE_FULL);
	CHECK(rcuref_heavy_install(membarrier_fence) == RCUREF_EDECIDED);
	CHECK(rcuref_heavy_install(membarrier_fence) == RCUREF_EDECIDED); /* nothing changed */
	CHECK(rcuref_fence_mode() == RCUREF_FENCE_FULL);
	waits_for_a_reader(w);
	CHECK(atomic_load(&heavy_fences) == 0);
	printf("heavy_install: decided full by %s first, the install refused\n",
	       by_grace_period ? "a grace period" : "rcuref_fence_mode");
	return 0;
}

static int found(rcuref_ctx *w)
{
	CHECK(rcuref_fence_mode() == RCUREF_FENCE_HEAVY); /* membarrier, found */
	CHECK(rcuref_heavy_install(membarrier_fence) == RCUREF_EBUSY);
	CHECK(rcuref_heavy_install(NULL) == RCUREF_EINVAL);
	waits_for_a_reader(w);
	CHECK(atomic_load(&heavy_fences) == 0); /* the library's own membarrier, not ours */
	printf("heavy_install: membarrier found at run time, an install refused\n");
	return 0;
}

#ifdef MUTANTS
/* The mutants archive's switches (ffi/src/mutants.rs; not in the header). */
void rcuref_mutant_after_claim(void (*f)(void));
void rcuref_mutant_old_install(bool on);

static atomic_long second_fences;
static int32_t second_install = 1, second_mode = -1;

static void second_fence(void)
{
	atomic_fetch_add(&second_fences, 1);
	membarrier_fence();
}

/* A second context's boot, run between the first install's claim and its request to
 * the library: its own install, then the mode. */
static void second_context(void)
{
	second_install = rcuref_heavy_install(second_fence);
	second_mode = rcuref_fence_mode();
}

/* Two installs at once, the second between the first's claim and its install: one
 * fence is installed, the other call is refused once it is, and the mode is heavy.
 * With `old` (the first version) the second call answers EBUSY before anything is
 * installed, its rcuref_fence_mode decides the mode full, and the first is refused:
 * exit 3 when that is seen (the control's verdict). */
static int race(rcuref_ctx *w, int old)
{
	rcuref_mutant_old_install(old);
	rcuref_mutant_after_claim(second_context);
	int32_t first = rcuref_heavy_install(membarrier_fence);
	rcuref_mutant_old_install(0);
	printf("heavy_install race%s: first %d, second %d, the second's mode %d\n",
	       old ? " (old install)" : "", first, second_install, second_mode);
	if (old)
		return first != RCUREF_OK && second_mode == RCUREF_FENCE_FULL ? 3 : 1;
	CHECK(first == RCUREF_OK);
	CHECK(second_install == RCUREF_EBUSY);
	CHECK(second_mode == RCUREF_FENCE_HEAVY);
	CHECK(rcuref_fence_mode() == RCUREF_FENCE_HEAVY);
	waits_for_a_reader(w);
	CHECK(atomic_load(&heavy_fences) > 0); /* the first call's fence is the one */
	CHECK(atomic_load(&second_fences) == 0);
	return 0;
}
#endif

static int plain(rcuref_ctx *w)
{
	CHECK(rcuref_heavy_install(NULL) == RCUREF_EINVAL);
	CHECK(rcuref_heavy_install(membarrier_fence) == RCUREF_ENOTSUP);
	CHECK(rcuref_fence_mode() == RCUREF_FENCE_FULL);
	waits_for_a_reader(w);
	CHECK(atomic_load(&heavy_fences) == 0);
	printf("heavy_install: an archive without auto-fence refuses the install\n");
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	int auto_fence = strcmp(mode, "install") == 0 || strcmp(mode, "decided") == 0 ||
			 strcmp(mode, "gp-first") == 0 || strncmp(mode, "race", 4) == 0;
	if (auto_fence && !(RCUREF_FFI_AUTO_FENCE && !RCUREF_FFI_MEMBARRIER)) {
		fprintf(stderr, "heavy_install %s: wants an archive with auto-fence only\n", mode);
		return 2;
	}
	if (strcmp(mode, "found") == 0 && !RCUREF_FFI_MEMBARRIER) {
		fprintf(stderr, "heavy_install found: wants an archive with membarrier\n");
		return 2;
	}
	if (strcmp(mode, "plain") == 0 && RCUREF_FFI_AUTO_FENCE) {
		fprintf(stderr, "heavy_install plain: wants an archive without auto-fence\n");
		return 2;
	}
	if (membarrier_register() != 0) {
		fprintf(stderr, "heavy_install: this kernel has no private expedited membarrier\n");
		return 2;
	}
	d = rcuref_rcu_domain(0);
	rcuref_ctx w;
	if (!d || rcuref_ctx_open(d, 0, 1, &w) != RCUREF_OK)
		return 2;
	if (strcmp(mode, "install") == 0)
		install(&w);
	else if (strcmp(mode, "decided") == 0)
		decided_first(&w, 0);
	else if (strcmp(mode, "gp-first") == 0)
		decided_first(&w, 1);
	else if (strcmp(mode, "found") == 0)
		found(&w);
#ifdef MUTANTS
	else if (strcmp(mode, "race") == 0 || strcmp(mode, "race-old") == 0) {
		int r = race(&w, strcmp(mode, "race-old") == 0);
		if (r != 0)
			return r;
	}
#endif
	else if (strcmp(mode, "plain") == 0)
		plain(&w);
	else {
		fprintf(stderr, "usage: heavy_install install|decided|gp-first|found|plain|race|race-old\n");
		return 2;
	}
	CHECK(rcuref_ctx_close(&w) == RCUREF_OK);
	if (failures) {
		fprintf(stderr, "heavy_install %s: %d check(s) failed\n", mode, failures);
		return 1;
	}
	return 0;
}
