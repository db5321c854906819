/*
 * `memb_ops <empty|read> <iterations>`: liburcu memb's read_lock + read_unlock in a
 * loop (the section body an empty asm with a memory clobber), for counting its
 * instructions under callgrind as benches/src/bin/ops.rs counts ours; `cargo xtask
 * bench` subtracts the empty loop. Built with _LGPL_SOURCE: the read side inlined.
 */
#define _LGPL_SOURCE
#include <urcu/urcu-memb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: memb_ops <empty|read> <iterations>\n");
		return 2;
	}
	long n = atol(argv[2]);
	int empty = strcmp(argv[1], "empty") == 0;
	urcu_memb_register_thread();
	if (empty) {
		for (long i = 0; i < n; i++)
			__asm__ __volatile__("" ::: "memory");
	} else {
		for (long i = 0; i < n; i++) {
			urcu_memb_read_lock();
			__asm__ __volatile__("" ::: "memory");
			urcu_memb_read_unlock();
		}
	}
	urcu_memb_unregister_thread();
	return 0;
}
