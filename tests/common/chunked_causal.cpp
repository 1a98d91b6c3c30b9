// The chunk form shared by causal linear attention and Lightning Attention
// (common/chunked_causal.hpp) on each tile path its backend has: on CUDA the
// tensor-core kernels, which store the state entering every chunk and compute
// the chunks in parallel, and the portable kernel, which walks them in order.
// Several chunks and one, a ragged last chunk, L = 1, head sizes 16 .. 256
// (above 128 the sweeps run in blocks of 128 columns on CUDA: common/head_blocks.hpp), d_v != d_k
// both ways, and chunk sizes the tensor-core kernels take (multiples of 16: 64, 128, and 16, 32,
// 48, 96, which end inside their 32-step and 64-row tiles) and leave to the portable path (100),
// an odd d_v and an odd d_k. Lightning's backward runs the same kernel in reverse time.
#include "common/head_blocks.hpp"
#include "forms/check.hpp"

using namespace attn;
using namespace attn::test;

namespace {

struct ChunkCase {
  Shape shape;
  int chunk;
};

const ChunkCase chunk_cases[] = {
    {{1, 2, 1, 16, 16}, 64},
    {{2, 3, 200, 16, 8}, 64},
    {{1, 2, 300, 40, 64}, 128},
    {{1, 1, 256, 128, 128}, 64},
    {{1, 2, 150, 64, 128}, 64},
    {{1, 1, 45, 256, 32}, 16},
    {{1, 1, 130, 32, 32}, 100},
    {{1, 2, 700, 128, 96}, 64},
    {{1, 2, 200, 64, 64}, 16},
    {{2, 1, 150, 32, 48}, 32},
    {{1, 2, 230, 128, 128}, 48},
    {{1, 2, 333, 64, 40}, 96},
    {{1, 2, 190, 48, 33}, 64},     // odd d_v: output rows of odd length, stored entry by entry
    {{1, 2, 130, 37, 24}, 64},     // odd d_k: query and key rows copied entry by entry
    {{1, 2, 200, 128, 128}, 256},  // one chunk of four row tiles: the output kernel alone, as
                                   // linear/parallel runs it
    {{1, 1, 1100, 128, 128}, 16},  // 69 chunks: three segments are long enough for the walk of
                                   // the whole state (whole_state_segment_chunks)
};

// f(name, form, shape, params) for each case and each chunked form.
template <class Cases, class F>
void for_each_chunked_form(const Cases& cases, F f) {
  for (const ChunkCase& c : cases)
    for (const char* name : {"linear/chunk", "lightning/fwd", "lightning/fwd_bwd"}) {
      FormParams params;
      params.set_axis("chunk", c.chunk);
      f(name, form_named(name), c.shape, params);
    }
}

}  // namespace

TEMPLATE_LIST_TEST_CASE(
    "chunked causal forms: the tensor-core and the portable paths both match the reference",
    "[forms][lightning]", Configs) {
  using Exec = typename TestType::Exec;
  using P = typename TestType::Precision;
  const std::uint64_t seed = test_seed();
  int ran = 0;
  for_each_tile_path<Exec>([&](bool tensor_cores) {
    // The tensor-core state passing: stored, the walk as the device's size
    // chooses, one walk per sequence, and segments of two chunks or more
    // joined after, the outputs in wide and in narrow value blocks, their
    // state part by warpgroup and by warp products; and walked with the
    // outputs (head sizes of 64 and more), in bf16 by the warpgroup walk,
    // whose sequences are cut into segments alike.
    for_each_state_passing<Exec>(tensor_cores, [&](StatePassing passing) {
      const bool stored = tensor_cores && passing != StatePassing::walked;
      const bool segmented = stored || (tensor_cores && std::is_same_v<P, bf16>);
      for_each_state_walk<Exec>(segmented, {0, 1, 3}, [&](int segments) {
        for_each_output_width<Exec>(stored, [&](int widths) {
          for_each_product_path<Exec>(stored, [&](bool warpgroup) {
            for_each_chunked_form(chunk_cases, [&](const char* name, const Form& form,
                                                   const Shape& s, const FormParams& params) {
              INFO(name << " on " << backend_name<Exec>() << " in " << precision_name<P>()
                        << (tensor_cores ? "" : ", portable") << ", B=" << s.batch
                        << " H=" << s.heads << " L=" << s.seq << " dk=" << s.dk << " dv=" << s.dv
                        << " chunk=" << params.axis("chunk") << ", state "
                        << (passing == StatePassing::walked ? "walked with the outputs" : "stored")
                        << ", segments " << segments << ", output blocks " << widths
                        << " (1 wide, 2 narrow), " << (warpgroup ? "warpgroup" : "warp")
                        << " products, seed " << seed);
              const HostProblem p = random_problem(s, form, seed, params);
              check_close<P>(run_form<Exec, P>(form, p, params), form.reference(p, params, {}));
              ++ran;
            });
          });
        });
      });
    });
  });
  require_ran<P>(ran, "chunked form");
}

// Heads cut into blocks of columns (common/head_blocks.hpp), forced to 16
// columns so that every backend and tile path cuts d_k and d_v, short last
// blocks included: the numerators summed over the key blocks, linear
// attention's normaliser alike, Lightning's backward sweeps in reverse time;
// and linear/parallel, which runs the chunk form's blocks with one chunk on
// tensor cores (its portable tiles take whole heads).
TEMPLATE_LIST_TEST_CASE("chunked causal forms with heads cut into column blocks",
                        "[forms][lightning]", Configs) {
  using Exec = typename TestType::Exec;
  using P = typename TestType::Precision;
  const std::uint64_t seed = test_seed();
  const ChunkCase cases[] = {
      {{1, 2, 150, 40, 24}, 64}, {{2, 1, 70, 16, 48}, 64}, {{1, 1, 1, 33, 17}, 64}};
  for_each_tile_path<Exec>([&](bool tensor_cores) {
    // The blocks' sweeps as the head's path chooses them: stored states, or
    // walked (in bf16 by the warpgroup walk where every block allows it).
    for_each_state_passing<Exec>(tensor_cores, [&](StatePassing passing) {
      for_each_chunked_form(cases, [&](const char* name, const Form& form, const Shape& s,
                                       const FormParams& params) {
        INFO(name << " on " << backend_name<Exec>() << " in " << precision_name<P>()
                  << (tensor_cores ? "" : ", portable") << ", blocks of 16 columns, L=" << s.seq
                  << " dk=" << s.dk << " dv=" << s.dv << ", state "
                  << (passing == StatePassing::walked ? "walked" : "stored or chosen") << ", seed "
                  << seed);
        const HostProblem p = random_problem(s, form, seed, params);
        const ref::Outputs want = form.reference(p, params, {});
        // Each key block's part is stored (rounded to storage_t<P>) before the
        // sum: up to three roundings here where the whole sweep has one.
        with_head_blocks(16, [&] { check_close<P>(run_form<Exec, P>(form, p, params), want, 2); });
      });
    });
    const Form& parallel = form_named("linear/parallel");
    for (const ChunkCase& c : cases) {
      INFO("linear/parallel on " << backend_name<Exec>() << " in " << precision_name<P>()
                                 << (tensor_cores ? "" : ", portable")
                                 << ", blocks of 16 columns, L=" << c.shape.seq << " dk="
                                 << c.shape.dk << " dv=" << c.shape.dv << ", seed " << seed);
      const HostProblem p = random_problem(c.shape, parallel, seed);
      const ref::Outputs want = parallel.reference(p, {}, {});
      with_head_blocks(16, [&] { check_close<P>(run_form<Exec, P>(parallel, p, {}), want, 2); });
    }
  });
}
