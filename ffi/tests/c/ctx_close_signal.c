/*
 * An interrupt closes the context its interrupted code is locking (the hole 445d135
 * closed). The main thread locks and unlocks one context in a loop; an interval timer
 * (every 20 us) raises SIGALRM, whose handler closes that context with
 * rcuref_ctx_close, and the loop opens it again once it sees the close.
 *
 * What the library promises (docs/c-api.md): a close of a slot inside a section is
 * refused (RCUREF_EINSECTION), and a lock through a closed context is refused
 * (RCUREF_ENOTOWNER), also when the close lands inside the lock, between its owner
 * check and its enter: the lock then backs out. So a lock that returned RCUREF_OK
 * holds a section on a context still open, and its unlock succeeds. The hole shows as
 * a lock that returned RCUREF_OK while the handler's close succeeded inside it: the
 * unlock is refused (RCUREF_ENOTOWNER, nobody owns the slot), the slot stays in a
 * section that nothing can end, and a grace period waited for from another context
 * never completes. After the loop the test checks those two consequences as well:
 * the reopened slot must not be in a section, and rcuref_synchronize from slot 1
 * must end (it gives up after a million attempts).
 *
 * Usage: ctx_close_signal <milliseconds> [skip-recheck]
 * It stops after <milliseconds> or after STOP_IN_LOCK closes inside lock calls, and
 * fails if fewer than MIN_IN_LOCK closes landed inside lock calls (the window was not
 * exercised). "skip-recheck" (only in the build against the mutants archive, -DMUTANTS)
 * turns on the variant whose lock does not re-check the owner after its enter: the
 * negative control, which exits 0 only if it caught the hole.
 */
#define _GNU_SOURCE
#include "check.h"
#include "clock.h"
#include "rcuref.h"
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#ifdef MUTANTS
/* ffi/src/mutants.rs: exported by the mutants archive only, not in the header. */
void rcuref_mutant_skip_owner_recheck(bool on);
#endif

#define OWNER 1u
#define STOP_IN_LOCK 20000L
#define MIN_IN_LOCK 1000L

static const rcuref_rcu *d;
static rcuref_ctx ctx; /* written by the loop only while `open_` is 0 */
static volatile sig_atomic_t open_, in_lock;
static volatile long closes, closes_in_lock, refused, close_errors;

static void on_tick(int sig)
{
	(void)sig;
	if (!open_)
		return;
	int during_lock = in_lock;
	int32_t r = rcuref_ctx_close(&ctx);
	if (r == RCUREF_OK) {
		open_ = 0;
		closes++;
		if (during_lock)
			closes_in_lock++;
	} else if (r == RCUREF_EINSECTION) {
		refused++;
	} else {
		close_errors++;
	}
}

static int give_up_after_a_million(void *arg, uint32_t attempts)
{
	(void)arg;
	return attempts >= 1000000u;
}

static void timer(long us)
{
	struct itimerval it = { { 0, us }, { 0, us } };
	CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: ctx_close_signal <milliseconds> [skip-recheck]\n");
		return 2;
	}
	double ms = atof(argv[1]);
	int control = argc > 2 && strcmp(argv[2], "skip-recheck") == 0;
#ifdef MUTANTS
	rcuref_mutant_skip_owner_recheck(control);
#else
	if (control) {
		fprintf(stderr, "ctx_close_signal: skip-recheck needs the mutants build\n");
		return 2;
	}
#endif
	d = rcuref_rcu_domain(0);
	CHECK(rcuref_ctx_open(d, 0, OWNER, &ctx) == RCUREF_OK);
	open_ = 1;

	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_tick;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
	timer(20);

	long tries = 0, locked = 0, lock_refused = 0, lock_errors = 0, hole_at = 0;
	double start = now_ms();
	for (;;) {
		if (!open_) {
			CHECK(rcuref_ctx_open(d, 0, OWNER, &ctx) == RCUREF_OK);
			atomic_signal_fence(memory_order_seq_cst);
			open_ = 1;
		}
		in_lock = 1;
		atomic_signal_fence(memory_order_seq_cst);
		int32_t r = rcuref_read_lock(&ctx);
		atomic_signal_fence(memory_order_seq_cst);
		in_lock = 0;
		tries++;
		if (r == RCUREF_OK) {
			locked++;
			if (rcuref_read_unlock(&ctx) != RCUREF_OK) {
				/* The lock said OK, yet a close succeeded inside it. */
				hole_at = tries;
				break;
			}
		} else if (r == RCUREF_ENOTOWNER) {
			lock_refused++;
			CHECK(!open_); /* refused only because the handler closed it */
		} else {
			lock_errors++;
		}
		if ((tries & 4095) == 0 &&
		    (now_ms() - start >= ms || closes_in_lock >= STOP_IN_LOCK))
			break;
	}
	timer(0);
	double took = now_ms() - start;

	/* The consequences, with the timer off: no section left on the slot, and a grace
	 * period from another context ends. */
	if (!open_) {
		CHECK(rcuref_ctx_open(d, 0, OWNER, &ctx) == RCUREF_OK);
		open_ = 1;
	}
	bool inside = true;
	CHECK(rcuref_in_read_section(&ctx, &inside) == RCUREF_OK);
	rcuref_ctx other;
	CHECK(rcuref_ctx_open(d, 1, OWNER + 1, &other) == RCUREF_OK);
	int32_t sync = rcuref_synchronize(&other, give_up_after_a_million, NULL);

	printf("ctx_close_signal%s: %ld locks in %.0f ms (%ld OK, %ld refused), %ld closes "
	       "(%ld inside lock calls), %ld refused in a "
	       "section\n",
	       control ? " (skip-recheck)" : "", tries, took, locked, lock_refused, closes,
	       closes_in_lock, refused);
	if (hole_at)
		printf("ctx_close_signal: HOLE at lock %ld (after %ld closes, %ld inside lock "
		       "calls): the lock returned RCUREF_OK, its unlock was refused\n",
		       hole_at, closes, closes_in_lock);
	printf("ctx_close_signal: afterwards the slot is %s a section; synchronize from "
	       "slot 1: %s\n",
	       inside ? "STILL IN" : "not in",
	       sync == RCUREF_OK ? "ended" : sync == RCUREF_EGAVEUP ? "NEVER ENDS (gave up)" : "error");
	CHECK(close_errors == 0);
	CHECK(lock_errors == 0);
	int caught = hole_at != 0 || inside || sync == RCUREF_EGAVEUP;
	if (control) {
		if (!caught) {
			fprintf(stderr, "ctx_close_signal: the control was not caught\n");
			return 1;
		}
		CHECK(hole_at != 0 && inside && sync == RCUREF_EGAVEUP);
		if (failures) {
			fprintf(stderr, "ctx_close_signal: %d check(s) failed\n", failures);
			return 1;
		}
		printf("ctx_close_signal: the control was caught\n");
		return 0;
	}
	CHECK(!caught);
	CHECK(sync == RCUREF_OK);
	CHECK(closes_in_lock >= MIN_IN_LOCK);
	if (failures) {
		fprintf(stderr, "ctx_close_signal: %d check(s) failed\n", failures);
		return 1;
	}
	return 0;
}
