/*
 * Sleeping waits from C (rcuref_set_sleep): a reader thread holds a section, a writer's
 * rcuref_synchronize goes to sleep through the domain's sleep function, and the reader's
 * unlock wakes it through the domain's wake function. The writer must return right
 * after the unlock, not after its sleep's bound. `sleep nowake` is the control: the
 * wake function sends nothing, and the writer must sleep out its bound (else this test
 * could not tell a wake from a poll). Exits 0 when every check passes.
 */
#define _GNU_SOURCE
#include "rcuref.h"
#include "check.h"
#include "clock.h"
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int rung;
static atomic_int sleeps, wakes, send_wakes = 1;
static atomic_int inside, leave;
static double bound_s = 2.0;
static double unlocked_at;

/* Sleeps until rung or the bound passes (the bound a real sleep must have too). */
static void sleep_fn(void *ctx)
{
	(void)ctx;
	atomic_fetch_add(&sleeps, 1);
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += (time_t)bound_s;
	until.tv_nsec += (long)((bound_s - (time_t)bound_s) * 1e9);
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&lock);
	while (!rung && pthread_cond_timedwait(&cv, &lock, &until) == 0)
		;
	rung = 0;
	pthread_mutex_unlock(&lock);
}

static void wake_fn(void)
{
	atomic_fetch_add(&wakes, 1);
	if (!atomic_load(&send_wakes))
		return;
	pthread_mutex_lock(&lock);
	rung = 1;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&lock);
}

static void *reader(void *arg)
{
	const rcuref_rcu *d = arg;
	rcuref_ctx me;
	CHECK(rcuref_ctx_open(d, 1, 101, &me) == RCUREF_OK);
	CHECK(rcuref_read_lock(&me) == RCUREF_OK);
	atomic_store(&inside, 1);
	while (!atomic_load(&leave))
		;
	unlocked_at = now_ms() / 1e3;
	CHECK(rcuref_read_unlock(&me) == RCUREF_OK);
	CHECK(rcuref_ctx_close(&me) == RCUREF_OK);
	return NULL;
}

/* Lets the reader leave once the writer has gone to sleep. */
static void *releaser(void *arg)
{
	(void)arg;
	while (atomic_load(&sleeps) == 0)
		;
	struct timespec pause = { 0, 20 * 1000 * 1000 };
	nanosleep(&pause, NULL);
	atomic_store(&leave, 1);
	return NULL;
}

int main(int argc, char **argv)
{
	int control = argc > 1 && strcmp(argv[1], "nowake") == 0;
	if (control) {
		atomic_store(&send_wakes, 0);
		bound_s = 0.6;
	}
	const rcuref_rcu *d = rcuref_rcu_domain(0);
	CHECK(rcuref_set_sleep(d, 0, sleep_fn, NULL, NULL) == RCUREF_EINVAL);
	CHECK(rcuref_set_sleep(NULL, 0, sleep_fn, NULL, wake_fn) == RCUREF_EINVAL);
	CHECK(rcuref_set_sleep(d, 0, sleep_fn, NULL, wake_fn) == RCUREF_OK);
	/* Nobody asleep: an unlock calls no wake. */
	rcuref_ctx w;
	CHECK(rcuref_ctx_open(d, 0, 100, &w) == RCUREF_OK);
	for (int i = 0; i < 1000; i++) {
		CHECK(rcuref_read_lock(&w) == RCUREF_OK);
		CHECK(rcuref_read_unlock(&w) == RCUREF_OK);
	}
	CHECK(atomic_load(&wakes) == 0);
	pthread_t r, rel;
	pthread_create(&r, NULL, reader, (void *)d);
	while (!atomic_load(&inside))
		;
	pthread_create(&rel, NULL, releaser, NULL);
	CHECK(rcuref_synchronize(&w, NULL, NULL) == RCUREF_OK);
	double returned = now_ms() / 1e3;
	pthread_join(r, NULL);
	pthread_join(rel, NULL);
	double after = returned - unlocked_at;
	CHECK(atomic_load(&sleeps) >= 1);
	if (control) {
		/* No wake: the writer slept out its bound after the unlock. */
		CHECK(after >= bound_s / 2);
	} else {
		CHECK(atomic_load(&wakes) >= 1);
		CHECK(after < bound_s / 3);
	}
	CHECK(rcuref_set_sleep(d, 0, NULL, NULL, NULL) == RCUREF_OK);
	printf("sleep%s: the writer slept %d times and returned %.3f s after the unlock (%d wakes)\n",
	       control ? " (no wake sent)" : "", atomic_load(&sleeps), after, atomic_load(&wakes));
	return failures != 0;
}
