// The kernel path each form's kernel takes (common/kernel_path.hpp), as the
// harness reads it for every row: the host's one path, and on CUDA the
// tensor cores where their tiles hold the chunk and the head, with why not
// where they do not.
#include "common/head_blocks.hpp"
#include "forms/check.hpp"
#include "softmax/tiled_backward.hpp"

using namespace attn;
using namespace attn::test;

TEST_CASE("path_is: every part of a path has the wanted word as one of its components",
          "[forms][paths]") {
  CHECK(path_is("tensor-core", "tensor-core"));
  CHECK(path_is("head-blocks/tensor-core", "tensor-core"));
  CHECK(path_is("head-blocks/tensor-core", "head-blocks"));
  CHECK(path_is("tensor-core/wide-head", "wide-head"));
  CHECK_FALSE(path_is("tensor-core/wide-head+portable", "tensor-core"));
  CHECK_FALSE(path_is("portable", "tensor-core"));
  CHECK_FALSE(path_is("tensor-core", "tensor"));
  CHECK(path_is("portable+portable", "portable"));
  // The bf16 softmax forward+backward on wgmma: both parts are warpgroup
  // kernels; the pass count, which only the backward has, is asked of it alone.
  const std::string one = "tensor-core/warpgroup+tensor-core/warpgroup/one-pass";
  CHECK(path_is(one, "warpgroup"));
  CHECK(path_is(one, "tensor-core"));
  CHECK(path_is(one, "one-pass"));
  CHECK_FALSE(path_is(one, "two-pass"));
  CHECK(path_is("tensor-core/warpgroup/two-pass", "two-pass"));
  CHECK_FALSE(path_is("tensor-core/warpgroup", "one-pass"));  // a forward has no passes
  CHECK_FALSE(path_is("tensor-core/warpgroup/one-pass+portable", "one-pass"));
}

namespace {

// f() with --softmax-backward-passes `passes` (Tuning::softmax_backward_passes).
template <class F>
void with_backward_passes(int passes, F f) {
  with_setting(tuning().softmax_backward_passes, passes, f);
}

}  // namespace

TEST_CASE(
    "the bf16 warpgroup softmax backward: one pass from L = 1k at heads up to 128, "
    "or as --softmax-backward-passes forces",
    "[forms][paths]") {
  auto one_pass = [](int seq, int d) { return softmax_backward_in_one_pass({1, 1, seq, d, d}); };
  CHECK_FALSE(one_pass(1023, 64));
  CHECK(one_pass(1024, 64));
  CHECK(one_pass(1024, 128));
  CHECK_FALSE(one_pass(1023, 128));
  CHECK(one_pass(4096, 128));
  CHECK_FALSE(one_pass(16384, 256));  // the one pass's registers hold 128 columns
  CHECK_FALSE(softmax_backward_in_one_pass({1, 1, 4096, 64, 160}));
  with_backward_passes(1, [&] {
    CHECK(one_pass(256, 64));
    CHECK(one_pass(256, 128));
    CHECK_FALSE(one_pass(4096, 256));
  });
  with_backward_passes(2, [&] {
    CHECK_FALSE(one_pass(4096, 64));
    CHECK_FALSE(one_pass(4096, 128));
  });
  CHECK(tuning().softmax_backward_passes == 0);
}

namespace {

// A form's path at B = H = 1, L = 256, heads of d columns and chunks of `chunk`.
template <class Exec, class P>
KernelPath path_at(const Form& form, int d, int chunk) {
  FormParams params = params_for(form, chunk, 4);
  return form.kernel_path<Exec, P>({1, 1, 256, d, d}, params);
}

// What CUDA's kernels take, form by form: the tensor cores where the chunk
// is a multiple of their tiles' rows (16) and the head at most 128, blocks or wide tiles above
// where a kernel has them, the portable kernels otherwise (with why).
struct Expected {
  const char* form;
  int d, chunk;
  const char* path;
  const char* reason;  // a part of the reason; "" for none
  // bf16's path and a part of its reason where they differ (on a device with
  // warpgroup products: the tests' GPU is an H100 or H200); nullptr: the same.
  const char* bf16_path = nullptr;
  const char* bf16_reason = nullptr;
};
const Expected on_cuda[] = {
    {"linear/chunk", 64, 64, "tensor-core", "", "tensor-core", "normalised"},
    {"linear/chunk", 64, 96, "tensor-core", "", "tensor-core", "normalised"},
    {"linear/chunk", 64, 100, "portable", "chunk 100 is not a multiple of 16"},
    {"linear/chunk", 256, 64, "head-blocks/tensor-core", "", "head-blocks/tensor-core/warpgroup"},
    {"linear/chunk", 256, 100, "head-blocks/portable", "chunk 100 is not a multiple of 16"},
    {"lightning/fwd_bwd", 64, 48, "tensor-core", "", "tensor-core",
     "chunk 48 is not the warpgroup walk's 64"},
    {"lightning/fwd", 64, 64, "tensor-core", "", "tensor-core/warpgroup"},
    {"lightning/fwd_bwd", 64, 100, "portable", "chunk 100 is not a multiple of 16"},
    {"lightning/fwd", 64, 256, "tensor-core", "", "tensor-core",
     "chunk 256 is not the warpgroup walk's 64"},  // one chunk: nothing straddles
    {"lion-s/chunk", 64, 96, "tensor-core", ""},
    {"lion-lit/chunk", 64, 100, "portable", "chunk 100 is not a multiple of 16"},
    {"lion-d/attention", 256, 64, "head-blocks/tensor-core", ""},
    {"lion-s/chunk", 256, 100, "portable", "chunk 100 is not a multiple of 16"},
    {"gsa/chunk", 64, 96, "tensor-core", ""},
    {"gsa/chunk", 64, 100, "portable", "chunk 100 is not a multiple of 16"},
    {"gsa/chunk_fwd_bwd", 256, 64, "tensor-core", ""},  // its kernels read blocks of 128
    {"softmax/full", 128, 0, "tensor-core", "", "tensor-core/warpgroup"},
    {"softmax/full", 36, 0, "tensor-core", "", "tensor-core/warpgroup",
     "rows of 36 bf16 columns are not whole 16-byte pieces"},
    // L = 256: the backward's two passes (one from L = 3k full, 4k causal).
    {"softmax/causal_fwd_bwd", 64, 0, "tensor-core", "",
     "tensor-core/warpgroup+tensor-core/warpgroup/two-pass"},
    {"softmax/full", 256, 0, "tensor-core/wide-head", "a head of 256 columns is above 128",
     "tensor-core/warpgroup", ""},
    {"softmax/causal_fwd_bwd", 256, 0, "tensor-core/wide-head",
     "a head of 256 columns is above 128", "tensor-core/warpgroup+tensor-core/warpgroup/two-pass",
     ""},
    {"softmax/full_fwd_bwd", 512, 0, "tensor-core/wide-head", "a head of 512 columns is above 128"},
    {"softmax/full_fwd_bwd", 640, 0, "tensor-core/wide-head+portable",
     "backward: a head of 640 columns is above 512"},
    {"linear/parallel", 256, 0, "head-blocks/tensor-core", "", "head-blocks/tensor-core",
     "chunk 256 is not the warpgroup walk's 64"},
    {"linear/recurrent", 64, 0, "portable", ""},
    {"lion-lit/rnn", 64, 0, "portable", ""},
};

}  // namespace

TEMPLATE_LIST_TEST_CASE(
    "each form's kernel path: the host's portable kernels, on CUDA the "
    "tensor cores where their tiles hold the chunk and head",
    "[forms][paths]", Configs) {
  using Exec = typename TestType::Exec;
  using P = typename TestType::Precision;
  int ran = 0;
  for (const Form& form : forms()) {
    if (!form.supports<P>()) continue;
    INFO(form.name);
    for (const int d : {64, 256})
      for (const int chunk : {64, 96, 100}) {
        const KernelPath path = path_at<Exec, P>(form, d, chunk);
        if (is_host_space<Exec>()) {
          CHECK(path.name == paths::portable);
          CHECK(path.reason.empty());
        } else if (std::is_same_v<P, double>) {
          CHECK(path.name == paths::portable);
          CHECK((path.reason == "double has no tensor-core kernels" ||
                 path_at<Exec, float>(form, d, chunk).name == paths::portable));
        }
        ++ran;
      }
  }
  require_ran<P>(ran, "form");
  if constexpr (!is_host_space<Exec>() && !std::is_same_v<P, double>) {
    int checked = 0;
    for (const Expected& e : on_cuda) {
      const Form* form = find_form(e.form);
      REQUIRE(form);
      if (!form->supports<P>()) continue;
      INFO(e.form << " d=" << e.d << " chunk=" << e.chunk);
      const KernelPath path = path_at<Exec, P>(*form, e.d, e.chunk);
      const bool differs = std::is_same_v<P, bf16> && e.bf16_path;
      CHECK(path.name == (differs ? e.bf16_path : e.path));
      if (const char* reason = differs && e.bf16_reason ? e.bf16_reason : e.reason; *reason)
        CHECK_THAT(path.reason, Catch::Contains(reason));
      else
        CHECK(path.reason.empty());
      ++checked;
    }
    CHECK(checked >= 10);
    // --tiles portable: every path portable, saying so.
    KernelPath forced;
    with_setting(tuning().tensor_cores, false,
                 [&] { forced = path_at<Exec, P>(*find_form("linear/chunk"), 64, 64); });
    CHECK(forced.name == paths::portable);
    CHECK(forced.reason == "--tiles portable");
    // --state-passing walked: the outputs computed as the states are walked
    // (WalkedChunkOutputs), named so, where its 64-row, 64-column tiles
    // apply: chunks of whole tiles, more than one of them, heads padded to 64
    // or 128 columns; bf16 there with chunks the warpgroup walk does not take.
    const Form& forward = *find_form("lightning/fwd");
    KernelPath by_chunk[4], ragged;
    with_setting(tuning().state_passing, StatePassing::walked, [&] {
      by_chunk[0] = path_at<Exec, P>(forward, 64, 128);
      by_chunk[1] = path_at<Exec, P>(forward, 64, 48);
      by_chunk[2] = path_at<Exec, P>(forward, 32, 128);
      by_chunk[3] = path_at<Exec, P>(forward, 64, 256);
      ragged = path_at<Exec, P>(forward, 160, 128);
    });
    CHECK(by_chunk[0].name == paths::walked);
    CHECK(by_chunk[1].name == paths::tensor_core);  // 48: not whole 64-row tiles
    CHECK(by_chunk[2].name == paths::tensor_core);  // a head padded to 32 columns
    CHECK(by_chunk[3].name == paths::tensor_core);  // one chunk: nothing to walk
    if constexpr (std::is_same_v<P, bf16>)
      CHECK_THAT(by_chunk[0].reason, Catch::Contains("chunk 128 is not the warpgroup walk's 64"));
    // 160 columns: blocks of 128 and 32, the last 32 x 32, which no walk takes.
    CHECK(ragged.name == "head-blocks/tensor-core");
    CHECK_THAT(ragged.reason, Catch::Contains("a head block of 32 x 32 columns"));
    // --warpgroup-products off: bf16 softmax on mma.sync, forward and
    // backward, saying so.
    if constexpr (std::is_same_v<P, bf16>) {
      KernelPath warp, both;
      with_setting(tuning().warpgroup_products, false, [&] {
        warp = path_at<Exec, P>(*find_form("softmax/full"), 128, 0);
        both = path_at<Exec, P>(*find_form("softmax/causal_fwd_bwd"), 64, 0);
      });
      CHECK(warp.name == paths::tensor_core);
      CHECK(warp.reason == "--warpgroup-products off");
      CHECK(both.name == paths::tensor_core);
      CHECK(both.reason == "--warpgroup-products off");
      // The chunk forms' warpgroup walk (chosen at any number of walks:
      // few are cut into segments), forced; --state-passing stored declines
      // it, saying so.
      const Form& lightning = *find_form("lightning/fwd_bwd");
      KernelPath walked, even_blocks, ragged_blocks, stored;
      with_setting(tuning().state_passing, StatePassing::walked, [&] {
        walked = path_at<Exec, P>(lightning, 64, 64);
        // A wide head's blocks follow one choice: 192 columns cut into 128
        // and 64 all walk; 164's last block of 36 columns cannot, so none
        // does: they compute their outputs with the walked states instead.
        even_blocks = path_at<Exec, P>(lightning, 192, 64);
        ragged_blocks = path_at<Exec, P>(lightning, 164, 64);
      });
      with_setting(tuning().state_passing, StatePassing::stored,
                   [&] { stored = path_at<Exec, P>(lightning, 64, 64); });
      CHECK(walked.name == paths::warpgroup);
      CHECK(walked.reason.empty());
      CHECK(even_blocks.name == "head-blocks/tensor-core/warpgroup");
      CHECK(ragged_blocks.name == "head-blocks/tensor-core/walked");
      CHECK_THAT(ragged_blocks.reason,
                 Catch::Contains("a head block of 128 x 36 columns: rows of 36 bf16 columns"));
      CHECK(stored.name == paths::tensor_core);
      CHECK(stored.reason == "--state-passing stored");
      // L not a multiple of 4: the backward's tiles by cp.async, saying so.
      const Form& fwd_bwd = *find_form("softmax/full_fwd_bwd");
      const KernelPath odd =
          fwd_bwd.kernel_path<Exec, P>({1, 1, 250, 64, 64}, params_for(fwd_bwd, 0, 4));
      CHECK(odd.name == "tensor-core/warpgroup+tensor-core/warpgroup/two-pass");
      CHECK(odd.reason ==
            "backward: L = 250 is not a multiple of 4: the backward's tiles copied "
            "by cp.async, not the TMA");
      // The backward's pass count: one pass from L = 1k at heads up to 128,
      // two below and at 256, or as
      // --softmax-backward-passes forces (one pass only where the head allows it).
      auto path_of = [](const char* name, int seq, int d) {
        const Form& form = *find_form(name);
        return form.kernel_path<Exec, P>({1, 1, seq, d, d}, params_for(form, 0, 4)).name;
      };
      const std::string one = "tensor-core/warpgroup+tensor-core/warpgroup/one-pass";
      const std::string two = "tensor-core/warpgroup+tensor-core/warpgroup/two-pass";
      CHECK(path_of("softmax/full_fwd_bwd", 1000, 64) == two);
      CHECK(path_of("softmax/full_fwd_bwd", 1024, 64) == one);
      CHECK(path_of("softmax/full_fwd_bwd", 1024, 128) == one);
      CHECK(path_of("softmax/causal_fwd_bwd", 1000, 128) == two);
      CHECK(path_of("softmax/causal_fwd_bwd", 4096, 64) == one);
      CHECK(path_of("softmax/full_fwd_bwd", 4096, 256) == two);
      CHECK(path_is(path_of("softmax/causal_fwd_bwd", 4096, 128), "warpgroup"));
      CHECK(path_is(path_of("softmax/causal_fwd_bwd", 4096, 128), "one-pass"));
      CHECK_FALSE(path_is(path_of("softmax/causal_fwd_bwd", 512, 128), "one-pass"));
      with_backward_passes(1, [&] {
        CHECK(path_of("softmax/causal_fwd_bwd", 256, 64) == one);
        CHECK(path_of("softmax/full_fwd_bwd", 256, 128) == one);
        CHECK(path_of("softmax/full_fwd_bwd", 4096, 256) == two);
      });
      with_backward_passes(2, [&] {
        CHECK(path_of("softmax/full_fwd_bwd", 4096, 64) == two);
        CHECK(path_of("softmax/causal_fwd_bwd", 4096, 128) == two);
      });
      // The forwards name no pass count.
      CHECK(path_of("softmax/full", 4096, 64) == paths::warpgroup);
    }
  }
}

TEST_CASE("heads cut into blocks take the blocks' own path", "[forms][paths]") {
  const Form& form = *find_form("linear/chunk");
  with_head_blocks(32, [&] {  // as the tests do, to run the blocks on the host
    CHECK(path_at<HostBackend, float>(form, 64, 64).name == "head-blocks/portable");
    CHECK(path_at<HostBackend, float>(form, 32, 64).name == paths::portable);
  });
}
