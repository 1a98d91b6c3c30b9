// This CPU's measured ceilings, for the roofline of host-backend results (the
// GPU's come from its datasheet, by device name, in python/attn_harness/render.py,
// which plots/render runs).
#pragma once

namespace attn {

struct HostCeilings {
  double fma_gflops = 0;  // fp32 fused multiply-adds, every OpenMP thread, vector registers only
  double copy_gbps = 0;   // a large array copied, bytes read + written per second
  int threads = 0;
};

// About half a second: the best of three short runs of each.
HostCeilings measure_host_ceilings();

}  // namespace attn
