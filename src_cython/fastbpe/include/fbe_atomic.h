/* Atomics of the batch runner and the cache pool: relaxed counters, sequentially
   consistent flags, and lock-free slots (a process forked at any moment inherits no
   held lock). */
#ifndef FASTBPE_FBE_ATOMIC_H
#define FASTBPE_FBE_ATOMIC_H
#include <Python.h>
static inline Py_ssize_t fbe_atomic_next(Py_ssize_t* counter) {
    return __atomic_fetch_add(counter, 1, __ATOMIC_RELAXED);
}
static inline Py_ssize_t fbe_atomic_load(Py_ssize_t* counter) {
    return __atomic_load_n(counter, __ATOMIC_RELAXED);
}
/* Sequentially consistent flags: a worker's "job j is done" and the caller's "I am
   about to sleep" are a store then a load on each side, so at least one side sees
   the other's store (see mark_done). */
static inline void fbe_flag_store(char* flag, char v) { __atomic_store_n(flag, v, __ATOMIC_SEQ_CST); }
static inline char fbe_flag_load(const char* flag) { return __atomic_load_n(flag, __ATOMIC_SEQ_CST); }
/* A pointer from one of n slots (emptying it), or NULL if all are empty. Lock-free,
   so a process forked at any moment inherits no held lock. */
static inline void* fbe_slot_take(void** slots, int n) {
    for (int i = 0; i < n; i++) {
        void* p = __atomic_exchange_n(&slots[i], (void*)0, __ATOMIC_ACQ_REL);
        if (p) return p;
    }
    return (void*)0;
}
/* Put p into an empty slot; 0 if all n are full (the caller frees p). */
static inline int fbe_slot_give(void** slots, int n, void* p) {
    for (int i = 0; i < n; i++) {
        void* expected = (void*)0;
        if (__atomic_compare_exchange_n(&slots[i], &expected, p, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED))
            return 1;
    }
    return 0;
}

#endif
