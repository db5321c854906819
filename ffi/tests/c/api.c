/*
 * The C API, call by call: results and every error code (docs/c-api.md). Exits 0 when
 * every check passes, 1 (naming the check) otherwise.
 */
#include "rcuref.h"
#include "check.h"
#include "rcuref_config.h" /* beside the archive: the build's configuration */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

static int calls;
static void count_call(void *arg)
{
	(*(int *)arg)++;
	calls++;
}

static int destroyed;
static void count_call_obj(void *obj)
{
	(void)obj;
	destroyed++;
}

/* A destroy callback that tries to publish the dying object again (the hostile
 * review's finding: it used to revive it, and the next alloc got a live count). */
static rcuref_pool *republish_pool;
static int republished = 1;
static void republish(void *obj)
{
	republished = rcuref_pool_publish(republish_pool, obj);
}

static int give_up_after(void *ctx, uint32_t attempts)
{
	return attempts >= *(uint32_t *)ctx;
}

/* A callback that calls the barrier through the context running the queue: it would
 * wait for itself (it used to, for ever with a null hook). */
static rcuref_ctx *barrier_ctx;
static int barrier_in_callback = 1, close_in_callback = 1;
static uint32_t inner_limit = 1000; /* a regression gives up instead of hanging */
static int give_up_after(void *ctx, uint32_t attempts);
static void barrier_inside(void *arg)
{
	(void)arg;
	barrier_in_callback = rcuref_rcu_barrier(barrier_ctx, give_up_after, &inner_limit);
	close_in_callback = rcuref_ctx_close(barrier_ctx);
}

/* Another context that ends a read section a token of main's began (srcu_up_read). */
static void *end_token(void *token)
{
	static int32_t r;
	r = rcuref_up_read(token);
	return &r;
}

/* The current-context function of `rcuref_rcu_read_lock()`. */
static const rcuref_ctx *current_ctx;
static const rcuref_ctx *current(void)
{
	return current_ctx;
}

int main(void)
{
	/* File references. */
	rcuref_fileref32 r;
	CHECK(rcuref_fileref32_init(&r, 1) == RCUREF_OK);
	CHECK(rcuref_fileref32_read(&r) == 1);
	CHECK(rcuref_fileref32_get(&r) == true);
	CHECK(rcuref_fileref32_inc(&r) == RCUREF_OK);
	CHECK(rcuref_fileref32_read(&r) == 3);
	CHECK(rcuref_fileref32_put(&r) == false);
	CHECK(rcuref_fileref32_put(&r) == false);
	CHECK(rcuref_fileref32_put(&r) == true); /* the last */
	CHECK(rcuref_fileref32_get(&r) == false); /* dead: gets fail */
	CHECK(rcuref_fileref32_read(&r) == 0);
	CHECK(rcuref_fileref32_init(&r, 1) == RCUREF_OK);
	CHECK(rcuref_fileref32_put_close(&r) == true);
	CHECK(rcuref_fileref32_init(&r, 0) == RCUREF_OK);
	CHECK(rcuref_fileref32_get(&r) == false);
	CHECK(rcuref_fileref32_init(NULL, 1) == RCUREF_EINVAL);
	/* A yes/no answers "no" for bad arguments: `if (get(...))` is never taken on one
	 * (it used to return RCUREF_EINVAL, -1, which is true in C). */
	CHECK(rcuref_fileref32_get(NULL) == false);
	if (rcuref_fileref32_get(NULL))
		CHECK(!"a bad argument read as a reference taken");
	CHECK(rcuref_fileref32_inc(NULL) == RCUREF_EINVAL);
	CHECK(rcuref_fileref32_put(NULL) == false);
	CHECK(rcuref_fileref32_put_close(NULL) == false);
	CHECK(rcuref_fileref32_read(NULL) == 0);
	/* A misaligned pointer is refused like null (made from an integer: an
	 * implementation-defined conversion, not a misaligned C access). */
	uint64_t storage[2] = {0, 0};
	rcuref_fileref32 *odd32 = (rcuref_fileref32 *)((uintptr_t)storage + 1);
	rcuref_fileref64 *odd64 = (rcuref_fileref64 *)((uintptr_t)storage + 4);
	CHECK(rcuref_fileref32_init(odd32, 1) == RCUREF_EINVAL);
	CHECK(rcuref_fileref32_get(odd32) == false);
	CHECK(rcuref_fileref64_put(odd64) == false);
	CHECK(storage[0] == 0 && storage[1] == 0);

	rcuref_fileref64 r64;
	CHECK(rcuref_fileref64_init(&r64, 2) == RCUREF_OK);
	CHECK(rcuref_fileref64_get(&r64) == true);
	CHECK(rcuref_fileref64_read(&r64) == 3);
	CHECK(rcuref_fileref64_put(&r64) == false);
	CHECK(rcuref_fileref64_put(&r64) == false);
	CHECK(rcuref_fileref64_put(&r64) == true);
	CHECK(rcuref_fileref64_get(&r64) == false);
	CHECK(rcuref_fileref64_get(NULL) == false);

	/* Domains. */
	const rcuref_rcu *d = rcuref_rcu_domain(0);
	CHECK(d != NULL);
	CHECK(rcuref_rcu_domain(1) != NULL && rcuref_rcu_domain(1) != d);
	CHECK(rcuref_rcu_domain(1000) == NULL);
	uint32_t slots = rcuref_rcu_slots(d);
	CHECK(slots >= 6);
	/* The generated configuration header says what the archive reports. */
	_Static_assert(RCUREF_FFI_DOMAINS >= 2, "api.c uses two domains");
	CHECK(slots == RCUREF_FFI_SLOTS);
	CHECK(rcuref_call_rcu_capacity(d) == RCUREF_FFI_CALLBACKS);
	CHECK(rcuref_rcu_domain(RCUREF_FFI_DOMAINS - 1) != NULL);
	CHECK(rcuref_rcu_domain(RCUREF_FFI_DOMAINS) == NULL);
	CHECK(rcuref_rcu_slots(NULL) == 0);
	int foreign_storage[64];
	const rcuref_rcu *foreign = (const rcuref_rcu *)foreign_storage;
	CHECK(rcuref_rcu_slots(foreign) == 0);

	/* Contexts: a slot, opened by one owner. c0 and c1 are two owners' (two tasks);
	 * c3 and c4 are both one owner's (one task reading through one slot and waiting
	 * through another). */
	rcuref_ctx c0, c1, c3, c4, other;
	CHECK(rcuref_ctx_open(d, 0, 1, &c0) == RCUREF_OK);
	CHECK(rcuref_ctx_open(d, 0, 1, &c0) == RCUREF_OK); /* again, same owner */
	CHECK(rcuref_ctx_open(d, 0, 2, &other) == RCUREF_EBUSY); /* another owner's slot */
	CHECK(rcuref_ctx_open(d, 1, 2, &c1) == RCUREF_OK);
	CHECK(rcuref_ctx_open(d, 3, 7, &c3) == RCUREF_OK);
	CHECK(rcuref_ctx_open(d, 4, 7, &c4) == RCUREF_OK);
	CHECK(rcuref_ctx_open(d, 5, 0, &other) == RCUREF_EINVAL); /* owner 0 */
	CHECK(rcuref_ctx_open(d, 5, 9, NULL) == RCUREF_EINVAL);
	CHECK(rcuref_ctx_open(d, 5, (size_t)-1, &other) == RCUREF_EINVAL); /* reserved */
	uint64_t ctx_storage[4] = {0};
	CHECK(rcuref_ctx_open(d, 5, 9, (rcuref_ctx *)((uintptr_t)ctx_storage + 1)) ==
	      RCUREF_EINVAL); /* misaligned */
	CHECK(rcuref_ctx_open(d, slots, 9, &other) == RCUREF_ERANGE);
	CHECK(rcuref_ctx_open(foreign, 5, 9, &other) == RCUREF_EDOMAIN);

	/* Split lock and unlock, nesting, errors. */
	bool inside = true;
	CHECK(rcuref_in_read_section(&c0, &inside) == RCUREF_OK && !inside);
	CHECK(rcuref_read_lock(&c0) == RCUREF_OK);
	CHECK(rcuref_read_lock(&c0) == RCUREF_OK); /* nested */
	CHECK(rcuref_in_read_section(&c0, &inside) == RCUREF_OK && inside);
	CHECK(rcuref_read_unlock(&c0) == RCUREF_OK);
	CHECK(rcuref_in_read_section(&c0, &inside) == RCUREF_OK && inside);
	/* An unlock through a context its slot's owner did not open is refused (a
	 * foreign unlock used to end another context's section). */
	rcuref_ctx forged = c0;
	forged.owner = 2;
	CHECK(rcuref_read_unlock(&forged) == RCUREF_ENOTOWNER);
	CHECK(rcuref_read_lock(&forged) == RCUREF_ENOTOWNER);
	CHECK(rcuref_in_read_section(&c0, &inside) == RCUREF_OK && inside);
	CHECK(rcuref_ctx_close(&c0) == RCUREF_EINSECTION); /* inside: stays open */
	CHECK(rcuref_read_unlock(&c0) == RCUREF_OK);
	CHECK(rcuref_in_read_section(&c0, &inside) == RCUREF_OK && !inside);
	CHECK(rcuref_in_read_section(&c0, NULL) == RCUREF_EINVAL);
	CHECK(rcuref_read_unlock(&c0) == RCUREF_ENOTLOCKED);
	CHECK(rcuref_read_lock(NULL) == RCUREF_EINVAL);
	forged = c0;
	forged.owner = 0; /* no owner: would name every slot nobody opened */
	CHECK(rcuref_read_lock(&forged) == RCUREF_EINVAL);
	forged = c0;
	forged.domain = foreign;
	CHECK(rcuref_read_lock(&forged) == RCUREF_EDOMAIN);
	forged = c0;
	forged.slot = slots;
	CHECK(rcuref_read_lock(&forged) == RCUREF_ERANGE);
	CHECK(rcuref_read_unlock(&forged) == RCUREF_ERANGE);
	/* Closed, a context is no one's: another owner may open the slot. */
	rcuref_ctx c5;
	CHECK(rcuref_ctx_open(d, 5, 9, &c5) == RCUREF_OK);
	CHECK(rcuref_ctx_close(&c5) == RCUREF_OK);
	CHECK(rcuref_read_lock(&c5) == RCUREF_ENOTOWNER);
	CHECK(rcuref_ctx_close(&c5) == RCUREF_ENOTOWNER);
	CHECK(rcuref_ctx_open(d, 5, 10, &c5) == RCUREF_OK);
	/* The current-context form (Linux's rcu_read_lock()). */
	CHECK(rcuref_rcu_read_lock() == RCUREF_EINVAL); /* no function registered */
	rcuref_set_current_context(current);
	CHECK(rcuref_rcu_read_lock() == RCUREF_EINVAL); /* it names none */
	current_ctx = &c5;
	CHECK(rcuref_rcu_read_lock() == RCUREF_OK);
	CHECK(rcuref_in_read_section(&c5, &inside) == RCUREF_OK && inside);
	CHECK(rcuref_rcu_read_unlock() == RCUREF_OK);
	CHECK(rcuref_in_read_section(&c5, &inside) == RCUREF_OK && !inside);
	rcuref_set_current_context(NULL);
	CHECK(rcuref_rcu_read_unlock() == RCUREF_EINVAL);
	inside = true;
	inside = true;
	CHECK(rcuref_in_read_section(&forged, &inside) == RCUREF_ERANGE && !inside);

	/* Nesting to the slot's ceiling: ceiling.c (2^30 locks, seconds). */

	/* Publishing. */
	static int a = 1, b = 2;
	void *where = NULL;
	CHECK(rcuref_assign_pointer(&where, &a) == RCUREF_OK);
	CHECK(rcuref_dereference(&where) == &a);
	CHECK(rcuref_exchange_pointer(&where, &b) == &a);
	CHECK(rcuref_dereference(&where) == &b);
	CHECK(rcuref_assign_pointer(NULL, &a) == RCUREF_EINVAL);
	CHECK(rcuref_dereference(NULL) == NULL);
	CHECK(rcuref_exchange_pointer(NULL, &a) == NULL);
	void **odd_where = (void **)((uintptr_t)storage + 2);
	CHECK(rcuref_assign_pointer(odd_where, &a) == RCUREF_EINVAL);
	CHECK(rcuref_dereference(odd_where) == NULL);
	CHECK(rcuref_exchange_pointer(odd_where, &a) == NULL);
	CHECK(storage[0] == 0 && storage[1] == 0);

	/* Waiting. */
	CHECK(rcuref_synchronize(&c0, NULL, NULL) == RCUREF_OK);
	CHECK(rcuref_read_lock(&c0) == RCUREF_OK);
	CHECK(rcuref_synchronize(&c0, NULL, NULL) == RCUREF_EINSECTION);
	uint32_t limit = 3;
	/* Another owner's context waits for slot 0's section: its hook gives up. */
	CHECK(rcuref_synchronize(&c1, give_up_after, &limit) == RCUREF_EGAVEUP);
	/* One owner waits through slot 4 inside its own section on slot 3: refused, it
	 * would wait for itself (it used to, for ever with a null hook). */
	CHECK(rcuref_read_lock(&c3) == RCUREF_OK);
	limit = 1000; /* a regression gives up (EGAVEUP) instead of hanging */
	CHECK(rcuref_synchronize(&c4, give_up_after, &limit) == RCUREF_EINSECTION);
	CHECK(rcuref_rcu_barrier(&c4, give_up_after, &limit) == RCUREF_EINSECTION);
	CHECK(rcuref_read_unlock(&c3) == RCUREF_OK);
	rcuref_cookie cookie;
	bool done = true;
	CHECK(rcuref_start_poll(d, &cookie) == RCUREF_OK);
	CHECK(rcuref_poll(d, cookie, &done) == RCUREF_OK && !done); /* slot 0 still reads */
	/* Another domain refuses the cookie (domain 1 has no reader inside: it used to
	 * answer done while domain 0's reader was in its section). */
	const rcuref_rcu *d1 = rcuref_rcu_domain(1);
	done = true;
	CHECK(rcuref_poll(d1, cookie, &done) == RCUREF_EDOMAIN && !done);
	rcuref_cookie zeroed = {0};
	CHECK(rcuref_poll(d, zeroed, &done) == RCUREF_EINVAL && !done);
	CHECK(rcuref_poll(d, cookie, NULL) == RCUREF_EINVAL);
	CHECK(rcuref_read_unlock(&c0) == RCUREF_OK);
	done = false;
	for (int i = 0; i < 10 && !done; i++)
		CHECK(rcuref_poll(d, cookie, &done) == RCUREF_OK);
	CHECK(done);
	CHECK(rcuref_start_poll(d, NULL) == RCUREF_EINVAL);
	CHECK(rcuref_start_poll(foreign, &cookie) == RCUREF_EDOMAIN);
	done = true;
	CHECK(rcuref_poll(NULL, cookie, &done) == RCUREF_EINVAL && !done);
	/* `if (rcuref_poll(...))` cannot be taken for "done": errors are codes, the answer
	 * is in `done`, false on any error. */
	done = true;
	if (rcuref_poll(foreign, cookie, &done) == RCUREF_OK || done)
		CHECK(!"a foreign domain's poll read as done");
	CHECK(rcuref_synchronize(&forged, NULL, NULL) == RCUREF_ERANGE);
	CHECK(rcuref_synchronize(NULL, NULL, NULL) == RCUREF_EINVAL);

	/* Linux's polled contract: get_state, the completed cookie, same_state,
	 * cond_synchronize, NUM_ACTIVE_RCU_POLL_OLDSTATE. */
	_Static_assert(RCUREF_ACTIVE_COOKIES == 3, "three grace periods in flight at most");
	rcuref_cookie s1, s2, done1, done2, done_d1;
	CHECK(rcuref_get_state(d, &s1) == RCUREF_OK);
	CHECK(rcuref_start_poll(d, &s2) == RCUREF_OK);
	CHECK(rcuref_same_state(s1, s2)); /* nothing stepped between: the same cookie */
	CHECK(rcuref_get_completed(d, &done1) == RCUREF_OK);
	CHECK(rcuref_get_completed(d, &done2) == RCUREF_OK);
	CHECK(rcuref_get_completed(d1, &done_d1) == RCUREF_OK);
	CHECK(rcuref_same_state(done1, done2));
	CHECK(!rcuref_same_state(done1, s1));
	CHECK(!rcuref_same_state(done1, done_d1)); /* another domain's */
	CHECK(!rcuref_same_state(zeroed, zeroed)); /* not cookies */
	CHECK(rcuref_get_state(d, NULL) == RCUREF_EINVAL);
	CHECK(rcuref_get_completed(d, NULL) == RCUREF_EINVAL);
	CHECK(rcuref_get_state(foreign, &s1) == RCUREF_EDOMAIN);
	CHECK(rcuref_get_completed(foreign, &s1) == RCUREF_EDOMAIN);
	CHECK(rcuref_get_completed(NULL, &s1) == RCUREF_EINVAL);
	done = true;
	CHECK(rcuref_poll(d1, done1, &done) == RCUREF_EDOMAIN && !done); /* still d's */
	CHECK(rcuref_read_lock(&c1) == RCUREF_OK); /* owner 2 reads: nothing ends */
	CHECK(rcuref_get_state(d, &s1) == RCUREF_OK);
	CHECK(rcuref_poll(d, s1, &done) == RCUREF_OK && !done);
	CHECK(rcuref_poll(d, done1, &done) == RCUREF_OK && done); /* always done */
	/* However many cookies are taken and polled while a reader holds the grace
	 * period up, at most RCUREF_ACTIVE_COOKIES distinct ones are not done. */
	rcuref_cookie active[8];
	int distinct = 0;
	for (int i = 0; i < 20; i++) {
		rcuref_cookie k;
		CHECK(rcuref_get_state(d, &k) == RCUREF_OK);
		CHECK(rcuref_poll(d, k, &done) == RCUREF_OK && !done);
		int seen = 0;
		for (int j = 0; j < distinct; j++)
			seen |= rcuref_same_state(active[j], k);
		if (!seen && distinct < 8)
			active[distinct++] = k;
	}
	CHECK(distinct >= 1 && distinct <= RCUREF_ACTIVE_COOKIES);
	/* cond_synchronize waits only when there is something to wait for: inside its
	 * own section, or its owner's on another slot, a done cookie returns at once and
	 * a pending one is refused. */
	CHECK(rcuref_read_lock(&c0) == RCUREF_OK);
	CHECK(rcuref_cond_synchronize(&c0, s1, NULL, NULL) == RCUREF_EINSECTION);
	CHECK(rcuref_cond_synchronize(&c0, done1, NULL, NULL) == RCUREF_OK);
	CHECK(rcuref_read_unlock(&c0) == RCUREF_OK);
	CHECK(rcuref_read_lock(&c3) == RCUREF_OK);
	limit = 1000; /* a regression gives up (EGAVEUP) instead of hanging */
	CHECK(rcuref_cond_synchronize(&c4, s1, give_up_after, &limit) == RCUREF_EINSECTION);
	CHECK(rcuref_cond_synchronize(&c4, done1, give_up_after, &limit) == RCUREF_OK);
	CHECK(rcuref_read_unlock(&c3) == RCUREF_OK);
	limit = 3; /* slot 1 still reads: the wait gives up */
	CHECK(rcuref_cond_synchronize(&c0, s1, give_up_after, &limit) == RCUREF_EGAVEUP);
	/* Cookie checks come first, as rcuref_poll's. */
	CHECK(rcuref_cond_synchronize(&c0, done_d1, NULL, NULL) == RCUREF_EDOMAIN);
	CHECK(rcuref_cond_synchronize(&c0, zeroed, NULL, NULL) == RCUREF_EINVAL);
	CHECK(rcuref_cond_synchronize(NULL, s1, NULL, NULL) == RCUREF_EINVAL);
	CHECK(rcuref_cond_synchronize(&forged, s1, NULL, NULL) == RCUREF_ERANGE);
	CHECK(rcuref_read_unlock(&c1) == RCUREF_OK);
	CHECK(rcuref_cond_synchronize(&c0, s1, NULL, NULL) == RCUREF_OK); /* waited */
	CHECK(rcuref_poll(d, s1, &done) == RCUREF_OK && done);
	CHECK(rcuref_read_lock(&c0) == RCUREF_OK); /* an old cookie: nothing to wait for */
	CHECK(rcuref_cond_synchronize(&c0, s1, NULL, NULL) == RCUREF_OK);
	CHECK(rcuref_read_unlock(&c0) == RCUREF_OK);
	for (int i = 0; i < 3; i++) /* the completed cookie stays done */
		CHECK(rcuref_synchronize(&c0, NULL, NULL) == RCUREF_OK);
	CHECK(rcuref_poll(d, done1, &done) == RCUREF_OK && done);

	/* Sections another context ends (srcu_down_read/srcu_up_read): a slot of their
	 * own each, beside the contexts' (which all stay open). */
	_Static_assert(RCUREF_FFI_TOKENS >= 2, "api.c uses two tokens");
	rcuref_read_token t1, t1_copy, t2, stale, toks[RCUREF_FFI_TOKENS];
	CHECK(rcuref_down_read(d, &t1) == RCUREF_OK);
	CHECK(rcuref_get_state(d, &s1) == RCUREF_OK);
	CHECK(rcuref_poll(d, s1, &done) == RCUREF_OK && !done); /* the token reads */
	limit = 3;
	CHECK(rcuref_synchronize(&c0, give_up_after, &limit) == RCUREF_EGAVEUP);
	CHECK(rcuref_read_lock(&c0) == RCUREF_OK); /* a context's section beside it */
	CHECK(rcuref_read_unlock(&c0) == RCUREF_OK);
	/* Handed to another thread, which ends it. */
	t1_copy = t1;
	pthread_t ender;
	void *ended = NULL;
	CHECK(pthread_create(&ender, NULL, end_token, &t1_copy) == 0);
	CHECK(pthread_join(ender, &ended) == 0);
	CHECK(ended && *(int32_t *)ended == RCUREF_OK);
	CHECK(rcuref_up_read(&t1_copy) == RCUREF_ENOTLOCKED); /* marked ended */
	CHECK(rcuref_up_read(&t1) == RCUREF_ENOTLOCKED); /* a copy: caught too */
	CHECK(rcuref_cond_synchronize(&c0, s1, NULL, NULL) == RCUREF_OK);
	/* Counted: RCUREF_FFI_TOKENS per domain, each domain its own. */
	for (unsigned i = 0; i < RCUREF_FFI_TOKENS; i++)
		CHECK(rcuref_down_read(d, &toks[i]) == RCUREF_OK);
	CHECK(rcuref_down_read(d, &t2) == RCUREF_EFULL);
	CHECK(rcuref_down_read(d1, &t2) == RCUREF_OK);
	CHECK(rcuref_up_read(&t2) == RCUREF_OK);
	/* A stale copy does not end the section that reuses its place. */
	stale = toks[0];
	CHECK(rcuref_up_read(&toks[0]) == RCUREF_OK);
	CHECK(rcuref_down_read(d, &t2) == RCUREF_OK); /* the free place again */
	CHECK(rcuref_up_read(&stale) == RCUREF_ENOTLOCKED);
	for (unsigned i = 1; i < RCUREF_FFI_TOKENS; i++)
		CHECK(rcuref_up_read(&toks[i]) == RCUREF_OK);
	CHECK(rcuref_get_state(d, &s1) == RCUREF_OK);
	CHECK(rcuref_poll(d, s1, &done) == RCUREF_OK && !done); /* t2 still reads */
	CHECK(rcuref_up_read(&t2) == RCUREF_OK);
	CHECK(rcuref_cond_synchronize(&c0, s1, NULL, NULL) == RCUREF_OK);
	CHECK(rcuref_rcu_slots(d) == RCUREF_FFI_SLOTS); /* the contexts' count */
	/* Errors. */
	CHECK(rcuref_down_read(NULL, &t2) == RCUREF_EINVAL);
	CHECK(rcuref_down_read(foreign, &t2) == RCUREF_EDOMAIN);
	CHECK(rcuref_down_read(d, NULL) == RCUREF_EINVAL);
	CHECK(rcuref_down_read(d, (rcuref_read_token *)((uintptr_t)ctx_storage + 1)) ==
	      RCUREF_EINVAL);
	rcuref_read_token zero_token = {0};
	CHECK(rcuref_up_read(&zero_token) == RCUREF_EINVAL); /* not a token */
	CHECK(rcuref_up_read(NULL) == RCUREF_EINVAL);
	CHECK(rcuref_down_read(d, &t2) == RCUREF_OK);
	rcuref_read_token forged_token = t2;
	forged_token.domain |= 0xFFFF; /* no such domain */
	CHECK(rcuref_up_read(&forged_token) == RCUREF_EDOMAIN);
	forged_token = t2;
	forged_token.seq++; /* not a section's */
	CHECK(rcuref_up_read(&forged_token) == RCUREF_EINVAL);
	forged_token = t2;
	forged_token.place = RCUREF_FFI_TOKENS; /* no such place */
	CHECK(rcuref_up_read(&forged_token) == RCUREF_EINVAL);
	CHECK(rcuref_up_read(&t2) == RCUREF_OK); /* the real one still ends it */
	CHECK(rcuref_synchronize(&c0, NULL, NULL) == RCUREF_OK);

	/* call_rcu: bounded, run after a grace period, barrier. */
	uint32_t cap = rcuref_call_rcu_capacity(d);
	CHECK(cap >= 1);
	CHECK(rcuref_call_rcu(d, NULL, NULL) == RCUREF_EINVAL);
	CHECK(rcuref_call_rcu(foreign, count_call, NULL) == RCUREF_EDOMAIN);
	int hits = 0;
	CHECK(rcuref_read_lock(&c1) == RCUREF_OK);
	for (uint32_t i = 0; i < cap; i++)
		CHECK(rcuref_call_rcu(d, count_call, &hits) == RCUREF_OK);
	CHECK(rcuref_call_rcu(d, count_call, &hits) == RCUREF_EFULL);
	CHECK(rcuref_call_rcu_pending(d) == cap);
	CHECK(rcuref_call_rcu_run(&c0) == 0); /* slot 1 is reading: nothing is due */
	CHECK(hits == 0);
	CHECK(rcuref_rcu_barrier(&c1, NULL, NULL) == RCUREF_EINSECTION);
	CHECK(rcuref_read_unlock(&c1) == RCUREF_OK);
	CHECK(rcuref_rcu_barrier(&c0, NULL, NULL) == RCUREF_OK);
	CHECK(hits == (int)cap);
	CHECK(rcuref_call_rcu_pending(d) == 0);
	CHECK(rcuref_call_rcu_run(NULL) == RCUREF_EINVAL);
	CHECK(rcuref_rcu_barrier(&forged, NULL, NULL) == RCUREF_ERANGE);
	/* A barrier from a callback, through the context running the queue (or another
	 * of its owner's), is refused: it would wait for itself. */
	barrier_ctx = &c0;
	CHECK(rcuref_call_rcu(d, barrier_inside, NULL) == RCUREF_OK);
	CHECK(rcuref_synchronize(&c1, NULL, NULL) == RCUREF_OK);
	CHECK(rcuref_call_rcu_run(&c0) == 1);
	CHECK(barrier_in_callback == RCUREF_EINCALLBACK);
	CHECK(close_in_callback == RCUREF_EINSECTION); /* running callbacks: stays open */
	/* The same for a callback that the barrier itself runs. */
	barrier_in_callback = close_in_callback = 1;
	CHECK(rcuref_call_rcu(d, barrier_inside, NULL) == RCUREF_OK);
	CHECK(rcuref_rcu_barrier(&c0, give_up_after, &inner_limit) == RCUREF_OK);
	CHECK(barrier_in_callback == RCUREF_EINCALLBACK);
	CHECK(close_in_callback == RCUREF_EINSECTION);
	CHECK(rcuref_rcu_barrier(&c0, NULL, NULL) == RCUREF_OK); /* outside: fine */
	/* A budgeted run (the limit of callbacks one softirq invokes). */
	hits = 0;
	for (int i = 0; i < 5; i++)
		CHECK(rcuref_call_rcu(d, count_call, &hits) == RCUREF_OK);
	CHECK(rcuref_synchronize(&c0, NULL, NULL) == RCUREF_OK); /* all five due */
	uint32_t left = 99;
	CHECK(rcuref_call_rcu_run_some(&c0, 2, &left) == 2 && left == 3 && hits == 2);
	CHECK(rcuref_call_rcu_run_some(&c0, 0, &left) == 0 && left == 3); /* counts only */
	CHECK(rcuref_call_rcu_run_some(&c0, 10, NULL) == 3 && hits == 5);
	left = 99;
	CHECK(rcuref_call_rcu_run_some(&c0, 10, &left) == 0 && left == 0);
	CHECK(rcuref_read_lock(&c1) == RCUREF_OK); /* not due: left, not run */
	CHECK(rcuref_call_rcu(d, count_call, &hits) == RCUREF_OK);
	CHECK(rcuref_call_rcu_run_some(&c0, 10, &left) == 0 && left == 1);
	CHECK(rcuref_read_unlock(&c1) == RCUREF_OK);
	CHECK(rcuref_synchronize(&c0, NULL, NULL) == RCUREF_OK);
	CHECK(rcuref_call_rcu_run_some(&c0, 10, &left) == 1 && left == 0 && hits == 6);
	left = 99;
	CHECK(rcuref_call_rcu_run_some(NULL, 1, &left) == RCUREF_EINVAL && left == 0);
	CHECK(rcuref_call_rcu_run_some(&forged, 1, NULL) == RCUREF_ERANGE);
	CHECK(rcuref_call_rcu_run_some(&c0, 1, (uint32_t *)((uintptr_t)ctx_storage + 1)) ==
	      RCUREF_EINVAL);
	/* Its callbacks are its owner's: a barrier from one is refused. */
	barrier_in_callback = close_in_callback = 1;
	CHECK(rcuref_call_rcu(d, barrier_inside, NULL) == RCUREF_OK);
	CHECK(rcuref_synchronize(&c1, NULL, NULL) == RCUREF_OK);
	CHECK(rcuref_call_rcu_run_some(&c0, 1, &left) == 1 && left == 0);
	CHECK(barrier_in_callback == RCUREF_EINCALLBACK);
	CHECK(close_in_callback == RCUREF_EINSECTION);
	CHECK(rcuref_ctx_close(&c1) == RCUREF_OK);

	/* The pool: caller storage, a node per object, errors. */
	struct thing {
		uint32_t key;
		rcuref_pool_node node;
	} things[3];
	rcuref_pool pool = {0};
	void *got = NULL, *loc = NULL;
	CHECK(rcuref_pool_alloc(&pool, &got) == RCUREF_EINVAL); /* not initialised */
	CHECK(rcuref_pool_init(&pool, things, sizeof things[0], 1, 3, NULL) == RCUREF_EINVAL);
	CHECK(rcuref_pool_init(&pool, things, 4, 0, 3, NULL) == RCUREF_EINVAL); /* node too big */
	CHECK(rcuref_pool_init(&pool, things, sizeof things[0], 0, 0, NULL) == RCUREF_EINVAL);
	CHECK(rcuref_pool_init(NULL, things, sizeof things[0], 0, 3, NULL) == RCUREF_EINVAL);
	CHECK(rcuref_pool_init(&pool, things, sizeof things[0],
			       offsetof(struct thing, node), 3, count_call_obj) == RCUREF_OK);
	for (int i = 0; i < 3; i++) {
		CHECK(rcuref_pool_alloc(&pool, &got) == RCUREF_OK);
		bool taken = true;
		CHECK(rcuref_pool_get(&pool, got, &taken) == RCUREF_OK && !taken); /* claimed: dead */
		((struct thing *)got)->key = (uint32_t)i;
		CHECK(rcuref_pool_publish(&pool, got) == RCUREF_OK);
		CHECK(rcuref_pool_publish(&pool, got) == RCUREF_EINVAL); /* twice */
	}
	CHECK(rcuref_pool_alloc(&pool, &got) == RCUREF_EFULL);
	bool taken = true, last = true;
	CHECK(rcuref_pool_get(&pool, &things[0].key + 1, &taken) == RCUREF_EDOMAIN); /* inside one */
	CHECK(!taken);
	CHECK(rcuref_pool_get(&pool, &a, &taken) == RCUREF_EDOMAIN); /* elsewhere */
	CHECK(rcuref_pool_get(&pool, &things[0], NULL) == RCUREF_EINVAL);
	CHECK(rcuref_pool_put(&pool, &things[3], &last) == RCUREF_EDOMAIN && !last); /* past the end */
	/* Initialising a pool in use, or a second pool over its array, is refused and
	 * changes nothing (it used to free every object: the next alloc handed out one
	 * that was still held). */
	CHECK(rcuref_pool_init(&pool, things, sizeof things[0], offsetof(struct thing, node), 3,
			       count_call_obj) == RCUREF_EBUSY);
	rcuref_pool second = {0};
	CHECK(rcuref_pool_init(&second, things, sizeof things[0], offsetof(struct thing, node), 3,
			       NULL) == RCUREF_EBUSY);
	/* ... also with another layout over the same memory (a shifted base: its nodes
	 * would sit on the objects' keys), and a pool in use given another array. */
	CHECK(rcuref_pool_init(&second, (char *)things + 4, sizeof things[0],
			       offsetof(struct thing, node), 2, NULL) == RCUREF_EBUSY);
	struct thing spare[2];
	CHECK(rcuref_pool_init(&pool, spare, sizeof spare[0], offsetof(struct thing, node), 2,
			       NULL) == RCUREF_EBUSY);
	CHECK(rcuref_pool_alloc(&second, &got) == RCUREF_EINVAL); /* still not a pool */
	void **odd_out = (void **)((uintptr_t)ctx_storage + 1); /* misaligned: refused */
	CHECK(rcuref_pool_alloc(&pool, odd_out) == RCUREF_EINVAL);
	CHECK(rcuref_pool_lookup(&pool, &loc, odd_out) == RCUREF_EINVAL);
	CHECK(rcuref_pool_alloc(&pool, &got) == RCUREF_EFULL);    /* nothing was freed */
	rcuref_assign_pointer(&loc, &things[1]);
	void *found = NULL;
	CHECK(rcuref_read_lock(&c0) == RCUREF_OK);
	CHECK(rcuref_pool_lookup(&pool, &loc, &found) == RCUREF_OK && found == &things[1]);
	CHECK(rcuref_read_unlock(&c0) == RCUREF_OK);
	CHECK(rcuref_pool_put(&pool, found, &last) == RCUREF_OK && !last); /* the lookup's */
	destroyed = 0;
	CHECK(rcuref_pool_put(&pool, &things[1], &last) == RCUREF_OK && last); /* destroyed, free */
	CHECK(destroyed == 1);
	CHECK(rcuref_pool_lookup(&pool, &loc, &found) == RCUREF_OK && found == NULL); /* dying */
	rcuref_assign_pointer(&loc, &a);
	CHECK(rcuref_pool_lookup(&pool, &loc, &found) == RCUREF_EDOMAIN);
	CHECK(rcuref_pool_lookup(&pool, NULL, &found) == RCUREF_EINVAL);
	CHECK(rcuref_pool_alloc(&pool, &got) == RCUREF_OK && got == &things[1]); /* reused */
	CHECK(rcuref_pool_publish(&pool, &things[0]) == RCUREF_EINVAL);           /* live */
	/* Once every object is free again, the pool may be initialised anew. */
	CHECK(rcuref_pool_publish(&pool, &things[1]) == RCUREF_OK);
	for (int i = 0; i < 3; i++)
		CHECK(rcuref_pool_put(&pool, &things[i], &last) == RCUREF_OK && last);
	CHECK(rcuref_pool_init(&pool, things, sizeof things[0], offsetof(struct thing, node), 3,
			       count_call_obj) == RCUREF_OK);

	/* A destroy callback cannot revive its object. */
	struct thing one[1];
	rcuref_pool pool1 = {0};
	republish_pool = &pool1;
	CHECK(rcuref_pool_init(&pool1, one, sizeof one[0], offsetof(struct thing, node), 1,
			       republish) == RCUREF_OK);
	CHECK(rcuref_pool_alloc(&pool1, &got) == RCUREF_OK);
	CHECK(rcuref_pool_publish(&pool1, got) == RCUREF_OK);
	CHECK(rcuref_pool_put(&pool1, got, NULL) == RCUREF_OK);
	CHECK(republished == RCUREF_EINVAL);
	CHECK(rcuref_pool_alloc(&pool1, &got) == RCUREF_OK);
	CHECK(rcuref_pool_get(&pool1, got, &taken) == RCUREF_OK && !taken); /* still dead */
	CHECK(rcuref_pool_publish(&pool1, got) == RCUREF_OK);

	if (failures) {
		fprintf(stderr, "api: %d check(s) failed\n", failures);
		return 1;
	}
	printf("api: every check passed (%u slots, %u call_rcu places)\n", slots, cap);
	return 0;
}
