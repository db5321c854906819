/* The host tortures' clock: milliseconds on CLOCK_MONOTONIC. */
#ifndef CLOCK_H
#define CLOCK_H
#include <time.h>

static inline double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}
#endif
