// ThreadPool: the worker threads an application lends a Method so that its
// kernels split large products, convolutions and element-wise passes across
// cores. The runtime owns no threads and creates none: the application
// passes a pool (Method::set_thread_pool) or passes none, and a Method
// without one runs every kernel on the calling thread. Firmware passes none.
//
// The interface is one call: parallel_for(count, task, context) runs
// task(context, i) once for every i in [0, count), on the pool's threads and
// the calling thread, and returns when all have finished. Tasks are plain
// function pointers with a context pointer (no type-erased callables, nothing to
// allocate); the kernels decide the partition, so a result never depends on
// how many threads ran it or which task ran where (see
// kernels/cpu/src/parallel.h).
//
// An implementation must not allocate in parallel_for (the no-heap tests run
// methods with a pool), must be callable from one thread at a time (a Method
// executes on one thread), and must run a call made from inside a task on the
// calling thread instead of deadlocking. PosixThreadPool
// (posix_thread_pool.h, host builds) is the one kiln ships.
//
// Lifetime: not owned by the Method; it must outlive every Method it is set on
// or be unset with nullptr first.

#ifndef KILN_RUNTIME_THREAD_POOL_H_
#define KILN_RUNTIME_THREAD_POOL_H_

#include <stdint.h>

namespace kiln {

class ThreadPool {
 public:
  using Task = void (*)(void* context, int64_t index);

  // How many threads run tasks at once, the calling thread included (>= 1).
  virtual int concurrency() const = 0;

  // Runs task(context, i) for every i in [0, count), in any order and on any
  // of the pool's threads, and returns once every call has returned.
  // Correctness may not depend on which thread runs which index; speed
  // may: a pool should give thread t of T the indices [t * count / T,
  // (t + 1) * count / T) where it can (PosixThreadPool does for calls of up
  // to 31 tasks), so that a kernel splitting its work the same way call
  // after call finds its data in the caches of the core that wrote it.
  virtual void parallel_for(int64_t count, Task task, void* context) = 0;

 protected:
  ~ThreadPool() = default;
};

}  // namespace kiln

#endif  // KILN_RUNTIME_THREAD_POOL_H_
