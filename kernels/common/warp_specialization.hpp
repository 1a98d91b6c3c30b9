// A team split by role (FlashAttention-3, Shah et al. 2024, Sec. 3.1): a
// producer warpgroup copies tiles into a ring of buffers in shared memory
// and consumer warpgroups compute on them, the two sides handing buffers
// over through barriers in shared memory (PTX ISA, "mbarrier") rather than
// team barriers, so that each waits only for what it reads and the
// consumers need not move in step. The producer gives most of its registers
// to the consumers (setmaxnreg). The pieces:
//   CopyBarrier                  one mbarrier; init(count) by one thread,
//                                then a team barrier before first use
//   arrive_when_copied(async)    one arrival that completes once the
//                                thread's copies so far have landed (by
//                                cp.async, or plain stores)
//   arrive(), arrive_if(arrives) one arrival (a consumer done with a buffer)
//   arrive_expecting(bytes)      one arrival, and `bytes` more to land by
//                                bulk copies (TMA, common/tensor_maps.hpp)
//                                before the phase completes
//   wait(parity)                 until the phase of that parity completes
//   CopyRing<Buffers>            the full and empty barriers of a ring of
//                                buffers: wait_empty, filled or landing
//                                (the copier); wait_for_products, hand_back,
//                                hand_back_after_loads (consumers)
//   copy_word_async(to, from, inside)
//                                4 bytes by cp.async (zeros outside)
//   sync_threads(id, threads)    a barrier for some of the team's warps
//   keep_registers<N, Raise>()   the warpgroup's registers per thread
//                                lowered (producer) or raised (consumers) to
//                                N, within the team's own pool
// sm_90a only (setmaxnreg), like the warpgroup products beside them.
#pragma once
#include "common/shared_tiles.hpp"

#include <cstdint>

namespace attn::mma {

#if defined(ATTN_WARPGROUP_MMA)
struct CopyBarrier {
  std::uint64_t word;

  __device__ std::uint32_t address() const {
    return static_cast<std::uint32_t>(__cvta_generic_to_shared(&word));
  }
  // The initialization is fenced so that the TMA's completions (the async
  // proxy) see it too; the team barrier after it orders it for the threads.
  __device__ void init(int count) {
    asm volatile(
        "mbarrier.init.shared::cta.b64 [%0], %1;\n"
        "fence.mbarrier_init.release.cluster;\n" ::"r"(address()),
        "r"(count)
        : "memory");
  }
  // The thread's one arrival for a tile it copied. By cp.async: an arrival
  // that the hardware makes once the thread's copies so far have landed
  // (.noinc: it counts as one of `count`). Otherwise (plain stores, a ragged
  // tile's) the thread waits for every copy of its own still in flight and
  // arrives, the arrival's release ordering its stores before the
  // consumers' acquiring wait. Every copy: cp.async.wait_all, not
  // wait_group, which would pass over copies not yet closed into a group
  // (a tile's statistics, issued after its pieces' groups).
  __device__ void arrive_when_copied(bool by_cp_async) {
    if (by_cp_async) {
      asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(address())
                   : "memory");
    } else {
      asm volatile("cp.async.wait_all;\n" ::: "memory");
      arrive();
    }
  }
  __device__ void arrive() {
    asm volatile(
        "{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(address())
        : "memory");
  }
  // The same where `arrives` holds: a predicated instruction, not a branch
  // around one.
  __device__ void arrive_if(bool arrives) {
    asm volatile(
        "{\n.reg .pred p;\n.reg .b64 state;\nsetp.ne.b32 p, %1, 0;\n"
        "@p mbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(address()),
        "r"(int(arrives))
        : "memory");
  }
  __device__ void arrive_expecting(std::uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(address()),
                 "r"(bytes)
                 : "memory");
  }
  __device__ void wait(int parity) const {
    std::uint32_t done = 0;
    do
      asm volatile(
          "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
          "selp.u32 %0, 1, 0, p;\n}\n"
          : "=r"(done)
          : "r"(address()), "r"(parity)
          : "memory");
    while (!done);
  }
};

// A ring of Buffers tile buffers with one barrier that says a buffer is full
// (count: the copying threads, each arriving once per tile) and one that
// says it is empty again (count: the consumer warps, handing each tile back
// once, or the consumer threads where they read it by plain loads). Tile j
// lives in buffer j % Buffers; the n-th use of a buffer is phase n of its
// barriers.
template <int Buffers>
struct CopyRing {
  CopyBarrier full[Buffers], empty[Buffers];

  __device__ void init(int copiers, int consumer_warps) {
    for (int i = 0; i < Buffers; ++i) {
      full[i].init(copiers);
      empty[i].init(consumer_warps);
    }
  }
  __device__ static int buffer(int j) { return j % Buffers; }
  // The copier waits until tile j - Buffers has been handed back (no wait
  // for the first Buffers tiles), copies tile j, then announces it.
  __device__ void wait_empty(int j) const {
    if (j >= Buffers) empty[buffer(j)].wait((j / Buffers - 1) & 1);
  }
  __device__ void filled(int j, bool by_cp_async) {
    full[buffer(j)].arrive_when_copied(by_cp_async);
  }
  // Or, copied by the TMA (a ring of one copier), the barrier its bytes
  // land on.
  __device__ CopyBarrier& landing(int j) { return full[buffer(j)]; }
  // Until tile j is in: the buffer's (j / Buffers)-th fill.
  __device__ void wait_full(int j) const { full[buffer(j)].wait((j / Buffers) & 1); }
  // A consumer waits for tile j before its warpgroup products read it: the
  // copies, written through the generic proxy, are then ordered before this
  // thread's products (which read through the async proxy).
  __device__ void wait_for_products(int j) const {
    wait_full(j);
    publish_to_warpgroup_products();
  }
  // A consumer warp hands tile j's buffer back once the products that read
  // it have been waited for (every lane is past the wait: a warpgroup
  // product's wait is an instruction of the whole warp).
  __device__ void hand_back(int j) { empty[buffer(j)].arrive_if(threadIdx.x % 32 == 0); }
  // The same where the threads also read the buffer by plain loads (a
  // tile's statistics): every consumer thread arrives (the ring counts
  // threads), so that each arrival's release orders that thread's own loads
  // before the copier's next write there. One lane's arrival after a warp
  // barrier would order the others' loads only through the barrier, an
  // order racecheck does not follow (it reported the copier's writes of
  // the statistics as racing with those loads).
  __device__ void hand_back_after_loads(int j) { empty[buffer(j)].arrive(); }
};

// 4 bytes from global memory to shared memory by cp.async (a float of a
// tile's statistics, tracked with the tile's pieces); zeros where `inside`
// is false (nothing is read from `from`).
__device__ __forceinline__ void copy_word_async(void* to, const void* from, bool inside) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(
                   static_cast<std::uint32_t>(__cvta_generic_to_shared(to))),
               "l"(from), "r"(inside ? 4 : 0)
               : "memory");
}

// A barrier for `threads` threads of the team (whole warps) that leaves the
// others running: named barrier `id`, 1 to 15 (0 is the team barrier's).
__device__ __forceinline__ void sync_threads(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Sets the registers per thread of the calling warpgroup (every thread of
// it calls this) to N, a multiple of 8 from 24 to 256: lowered, they return
// to the team's pool; raised, they are taken from it, waiting until other
// warpgroups have lowered theirs. The pool holds what the team launched
// with (threads x the kernel's registers): a raise past it waits forever.
// ptxas allocates the code after the call within N.
template <int N, bool Raise>
__device__ __forceinline__ void keep_registers() {
  static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg's range");
  if constexpr (Raise)
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
  else
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
#endif

}  // namespace attn::mma
