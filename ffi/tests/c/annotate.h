/*
 * ThreadSanitizer does not see inside librcuref_ffi.a (it is not instrumented), so
 * under -fsanitize=thread the tests tell it, at each call, the ordering the API
 * promises, and TSan checks the C side's own plain accesses against it:
 *   publish (assign/exchange) releases the location, dereference acquires it;
 *   every read_unlock releases the domain, a finished wait (synchronize, barrier,
 *   a callback's run) acquires it; call_rcu releases its argument and the callback
 *   acquires it; a put releases the count, the last put acquires it.
 * Plain builds define these as nothing.
 */
#ifndef ANNOTATE_H
#define ANNOTATE_H
#if defined(__SANITIZE_THREAD__)
void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define HB_ACQUIRE(p) __tsan_acquire((void *)(p))
#define HB_RELEASE(p) __tsan_release((void *)(p))
#else
#define HB_ACQUIRE(p) ((void)(p))
#define HB_RELEASE(p) ((void)(p))
#endif
#endif
