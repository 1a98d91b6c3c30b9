// How the kernels choose where the choice changes their speed, not their
// results: one value for the process, set by bench from its options (bench
// sweep --help, "tuning") and by the tests, which run each setting; no kernel
// reads the environment. A result row measured with a setting other than the
// default names it in its variant (harness/registry.cpp, variant_of), so that
// a tuned row is never taken for a default one. No CUDA here: the harness
// reads this header.
#pragma once

namespace attn {

// How the tensor-core chunk forms pass the state from chunk to chunk:
// `chosen` as walked_outputs_taken chooses by the problem and the device;
// `stored`: a walk stores every chunk's entering state and the outputs are
// computed in parallel after; `walked`: each team walks its chunks and
// computes their outputs as it goes (WalkedChunkOutputs).
enum class StatePassing { chosen, stored, walked };

// How the output kernel of the stored states waits for them: `chunk`, each
// team for the state of its own chunk, which the walk flags once it has
// stored it (mma::publish_flag), where the sequence is walked in one segment
// and the device overlaps kernels (mma::Start), so that the first chunks'
// outputs are computed while the walk still runs; `kernel`, every team for
// the whole walk (and the join of its segments) to finish.
enum class StateWait { chunk, kernel };

struct Tuning {
  // Whether kernels with a tensor-core path may take it (bench --tiles auto)
  // or run their portable path instead (--tiles portable).
  bool tensor_cores = true;
  // Whether tile products with a warpgroup path (wgmma, compiled for sm_90a)
  // take it or their warp path (mma.sync); where the warpgroup path is not
  // compiled, the warp path runs either way.
  bool warpgroup_products = true;
  // How many segments the tensor-core chunk forms (chunked_causal's and
  // GSA's gated chunks) cut each sequence's state walk into: 0 chooses by the
  // device's size (chunked_causal_tensor_core.hpp, state_segments); at most the stored
  // states are used.
  int state_segments = 0;
  StatePassing state_passing = StatePassing::chosen;
  StateWait state_wait = StateWait::chunk;
  // Which value blocks the tensor-core chunk forms' output kernel takes where
  // it has two widths (d = 128): 0 chooses by the number of teams and, in
  // float and tf32, of chunks; 1 every column per team, 2 half.
  int output_blocks = 0;
  // The widest query/key and value axes a chunked sweep takes whole; wider
  // ones are cut into blocks of this many columns. 0 cuts only where the
  // tensor cores would otherwise decline (above 128, on CUDA in float, tf32
  // and bf16); the tests set it lower to run the blocks on every backend.
  int head_block = 0;
  // The bf16 warpgroup softmax backward: 0 chooses (one pass up to d = 128
  // from L = 1k: softmax_backward_in_one_pass in
  // softmax/tiled_backward.hpp), 1 one pass where the head allows it,
  // 2 two passes (a dQ pass and a dK, dV pass) at every head.
  int softmax_backward_passes = 0;
};

inline Tuning& tuning() {
  static Tuning current;
  return current;
}

}  // namespace attn
