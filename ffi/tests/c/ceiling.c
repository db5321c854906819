/*
 * A read section nested to its slot's ceiling (about 2^30 levels, some seconds): a
 * lock there is refused with RCUREF_ETOODEEP, changing nothing, so balanced unlocks
 * still end the section. (It used to stick: every lock and unlock returned OK, and
 * after the last unlock the slot was still inside, wedging every grace period of the
 * domain.) Exits 0 when every check passes, 1 otherwise.
 */
#include "rcuref.h"
#include "check.h"
#include <stdio.h>

int main(void)
{
	const rcuref_rcu *d = rcuref_rcu_domain(0);
	uint32_t slots = rcuref_rcu_slots(d);
	bool inside = true;
	CHECK(slots >= 2);
	rcuref_ctx top, writer;
	CHECK(rcuref_ctx_open(d, slots - 1, 1, &top) == RCUREF_OK);
	CHECK(rcuref_ctx_open(d, 0, 2, &writer) == RCUREF_OK);
	uint32_t depth = 0;
	int32_t rc = RCUREF_OK;
	while ((rc = rcuref_read_lock(&top)) == RCUREF_OK && depth < (1u << 31))
		depth++;
	CHECK(rc == RCUREF_ETOODEEP);
	CHECK(depth > (1u << 29));
	CHECK(rcuref_read_lock(&top) == RCUREF_ETOODEEP);
	uint32_t unlocked = 0;
	while (rcuref_read_unlock(&top) == RCUREF_OK)
		unlocked++;
	CHECK(unlocked == depth);
	CHECK(rcuref_in_read_section(&top, &inside) == RCUREF_OK && !inside);
	/* The domain's grace periods end again. */
	CHECK(rcuref_synchronize(&writer, NULL, NULL) == RCUREF_OK);
	if (failures) {
		fprintf(stderr, "ceiling: %d check(s) failed\n", failures);
		return 1;
	}
	printf("ceiling: %u levels entered, the next refused, %u left: the slot is out\n", depth,
	       unlocked);
	return 0;
}
