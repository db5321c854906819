/*
 * The archive built with the feature debug-objects (Linux's DEBUG_OBJECTS_RCU_HEAD):
 * a callback whose `arg` is already queued is refused with RCUREF_EQUEUED, nothing
 * queued. Exits 0 when every check passes, 1 when another check fails, and 3 when the
 * second queueing of one `arg` goes through: what an archive without the feature does
 * (`cargo xtask ffi` runs this against one, as the check's negative control).
 */
#include "rcuref.h"
#include "check.h"
#include "rcuref_config.h" /* beside the archive this test is linked with */
#include <stdio.h>

static int freed;
static void free_obj(void *obj)
{
	(void)obj;
	freed++;
}

int main(void)
{
	printf("debug_objects: archive built with RCUREF_FFI_DEBUG_OBJECTS=%d\n",
	       RCUREF_FFI_DEBUG_OBJECTS);
	const rcuref_rcu *d = rcuref_rcu_domain(0), *d1 = rcuref_rcu_domain(1);
	rcuref_ctx c, c1;
	CHECK(rcuref_ctx_open(d, 0, 1, &c) == RCUREF_OK);
	CHECK(rcuref_ctx_open(d1, 0, 1, &c1) == RCUREF_OK);
	static int obj, other;

	CHECK(rcuref_call_rcu(d, free_obj, &obj) == RCUREF_OK);
	int32_t twice = rcuref_call_rcu(d, free_obj, &obj);
	if (twice == RCUREF_OK) {
		fprintf(stderr, "debug_objects: the same arg was queued twice\n");
		return 3;
	}
	CHECK(twice == RCUREF_EQUEUED);
	CHECK(rcuref_call_rcu_pending(d) == 1); /* nothing queued by the refusal */
	CHECK(rcuref_call_rcu(d, free_obj, &other) == RCUREF_OK); /* another arg */
	CHECK(rcuref_call_rcu(d1, free_obj, &obj) == RCUREF_OK);  /* another queue */
	CHECK(rcuref_call_rcu(d, free_obj, NULL) == RCUREF_OK);   /* NULL: never checked */
	CHECK(rcuref_call_rcu(d, free_obj, NULL) == RCUREF_OK);
	CHECK(rcuref_rcu_barrier(&c, NULL, NULL) == RCUREF_OK);
	CHECK(rcuref_rcu_barrier(&c1, NULL, NULL) == RCUREF_OK);
	CHECK(freed == 5);
	/* Once its callback has run, the arg may be queued again. */
	CHECK(rcuref_call_rcu(d, free_obj, &obj) == RCUREF_OK);
	CHECK(rcuref_call_rcu(d, free_obj, &obj) == RCUREF_EQUEUED);
	CHECK(rcuref_rcu_barrier(&c, NULL, NULL) == RCUREF_OK);
	CHECK(freed == 6);

	if (failures) {
		fprintf(stderr, "debug_objects: %d check(s) failed\n", failures);
		return 1;
	}
	printf("debug_objects: an arg queued twice is refused\n");
	return 0;
}
