// Every form at long L, in every precision it runs in, within its
// precision's tolerance: the lengths the papers' figures are about, where
// decays, gates and accumulations go wrong, checked cheaply by the sweep's
// own sampled rows (error_check.hpp). Hidden from the default run ([.long]:
// minutes on a CPU): `attn_tests "[long]"`, on the GPU machine too.
#include <cstdio>

#include "forms/check.hpp"
#include "measure.hpp"

using namespace attn;
using namespace attn::test;

namespace {

// 16K tokens on a CPU, 64K on a GPU.
template <class Exec>
int long_seq() {
  return is_host_space<Exec>() ? 16384 : 65536;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("every form stays within its precision's tolerance at long L",
                        "[.long][forms]", Configs) {
  using Exec = typename TestType::Exec;
  using P = typename TestType::Precision;
  const Shape s{1, 2, long_seq<Exec>(), 64, 64};
  MeasureOptions options;
  options.reps = 1;
  options.warmup = 0;
  options.seed = test_seed();
  options.check_flops = 1e10;  // sampled rows, as a sweep checks these lengths
  int ran = 0;
  for (const Form& form : forms()) {
    // The materialised forms hold L x L matrices: 16 GiB at 64K.
    if (!form.runner<Exec, P>() || form.memory == MemoryKind::quadratic) continue;
    const FormParams params = params_for(form, 64, 64);
    INFO(form.name << " in " << precision_name<P>() << " on " << backend_name<Exec>()
                   << " at L = " << s.seq);
    const ResultRow row = measure_point<Exec, P>(form, s, params, options);
    CHECK(row.status == "ok");
    CHECK(row.err_rows == options.check_rows);
    CHECK(row.rel_l2_err <= precision_traits<P>::rel_l2_tolerance);
    std::printf("%-24s %-6s %-6s L=%d: rel. L2 error %.3g on %d sampled rows, %.3f ms\n",
                form.name.c_str(), precision_name<P>(), backend_name<Exec>().c_str(), s.seq,
                row.rel_l2_err, row.err_rows, row.time_median_s * 1e3);
    ++ran;
  }
  require_ran<P>(ran, "every form");
}
