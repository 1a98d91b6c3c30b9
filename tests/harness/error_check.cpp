// The error check of a sweep point: which pairs and rows it compares, the
// references of sampled rows against the whole references, and a sampled
// check finding at long L a drift that a short check does not see.
#include <cfenv>
#include <set>

#include "forms/check.hpp"
#include "measure.hpp"

namespace attn::test {
namespace {

// o_t = the mean of v_0 .. v_t, summed in float with every addition rounded
// toward zero, as a tensor core's accumulator does: a running sum of one
// sign loses a unit of its last place at each step, so the error grows with
// t. The planted drift of the last test.
struct TruncatingPrefixMean {
  template <class Exec, class P>
  static void run(const Exec&, const Inputs<Exec, storage_t<P>>& x, const FormParams&) {
    const int rounding = std::fegetround();
    std::fesetround(FE_TOWARDZERO);
    for (int b = 0; b < int(x.v.extent(0)); ++b)
      for (int h = 0; h < int(x.v.extent(1)); ++h)
        for (int d = 0; d < int(x.v.extent(3)); ++d) {
          volatile float sum = 0;  // each addition rounded, in this mode
          for (int t = 0; t < int(x.v.extent(2)); ++t) {
            sum = sum + float(x.v(b, h, t, d));
            x.o(b, h, t, d) = storage_t<P>(sum / float(t + 1));
          }
        }
    std::fesetround(rounding);
  }
};

ref::Outputs prefix_mean_reference(const ref::Problem& p, const FormParams&,
                                   const ref::RowList& rows) {
  ref::Tensor o(p.v.batch, p.v.heads, p.v.seq, p.v.dim);
  for (int b = 0; b < o.batch; ++b)
    for (int h = 0; h < o.heads; ++h)
      for (int d = 0; d < o.dim; ++d) {
        double sum = 0;
        std::set<int> listed(rows.begin(), rows.end());
        for (int t = 0; t < o.seq; ++t) {
          sum += p.v(b, h, t, d);
          if (rows.empty() || listed.count(t)) o(b, h, t, d) = sum / (t + 1);
        }
      }
  return ref::output_only(std::move(o));
}

// Declared quadratic, as the attention references are, so that long points
// are checked on sampled rows.
Cost prefix_mean_cost(const Shape& s, const FormParams&, std::size_t scalar_bytes) {
  const double n = double(s.batch) * s.heads * s.seq * s.dv;
  return {n, 2 * n * scalar_bytes, double(s.seq) * s.seq * s.dv};
}

std::string no_vectors(const FormParams&) { return ""; }

// v drawn as 1 + z / 4: mostly positive, so the running sum keeps one sign.
const Draw positive_draw{"positive", [](ref::Tensor& x, const OptionValues&) {
                           for_each_element(x, [](double z) { return 1 + z / 4; });
                         }};

Form truncating_form() {
  std::vector<TensorSpec> tensors = attention_tensors(normal_draw);
  for (TensorSpec& t : tensors)
    if (t.name == "v") t.draw = &positive_draw;
  return {"test/truncating_prefix_mean",
          "test",
          "o_t = mean(v_0 .. v_t), summed in float rounded toward zero",
          Direction::causal,
          {},
          {},
          tensors,
          MemoryKind::io_only,
          runners_of<TruncatingPrefixMean>(),
          &prefix_mean_reference,
          &prefix_mean_cost,
          &no_vectors};
}

}  // namespace
}  // namespace attn::test

using namespace attn;
using namespace attn::test;

TEST_CASE("sampled rows: the boundaries first, then random rows, distinct and fixed by the seed",
          "[harness][error_check]") {
  const ref::RowList rows = sample_rows(1000, 16, 64, 7);
  CHECK(rows.size() == 16);
  CHECK(std::is_sorted(rows.begin(), rows.end()));
  CHECK(std::set<int>(rows.begin(), rows.end()).size() == 16);
  for (int boundary : {0, 999, 64, 63, 960, 959})
    CHECK(std::count(rows.begin(), rows.end(), boundary) == 1);
  CHECK(rows.back() == 999);
  CHECK(sample_rows(1000, 16, 64, 7) == rows);
  CHECK(sample_rows(1000, 16, 64, 8) != rows);
  CHECK(sample_rows(5, 16, 64, 7) == ref::RowList{0, 1, 2, 3, 4});  // every row, once
  CHECK(sample_rows(1000, 2, 64, 7) == ref::RowList{0, 999});
}

TEST_CASE("the check takes whole pairs where they fit, else sampled rows, else none",
          "[harness][error_check]") {
  const Shape s{2, 4, 1000, 64, 64};
  const double head = 1e6;
  CHECK(plan_error_check(s, head, 8e6, 16, 64, 1).heads.size() == 8);  // all pairs
  const ErrorCheck two = plan_error_check(s, head, 2e6, 16, 64, 1);
  CHECK(two.heads == HeadList{{0, 0}, {1, 3}});
  CHECK(two.rows.empty());
  CHECK(two.rows_per_head(s.seq) == 1000);
  CHECK(plan_error_check(s, head, 1e6, 16, 64, 1).heads == HeadList{{0, 0}});
  // A row costs at most 2 x 1e6 / 1000 = 2000: 16 rows of two pairs, 64000.
  const ErrorCheck sampled = plan_error_check(s, head, 64000, 16, 64, 1);
  CHECK(sampled.heads.size() == 2);
  CHECK(sampled.rows == sample_rows(1000, 16, 64, 1));
  CHECK(sampled.rows_per_head(s.seq) == 16);
  const ErrorCheck five = plan_error_check(s, head, 20000, 16, 64, 1);  // as many as fit
  CHECK(five.heads.size() == 2);
  CHECK(five.rows.size() == 5);
  // Two rows of two pairs fit, four of one: the fewest a cut-short sample takes.
  const ErrorCheck one = plan_error_check(s, head, 8000, 16, 64, 1);
  CHECK(one.heads == HeadList{{0, 0}});
  CHECK(one.rows == sample_rows(1000, 4, 64, 1));
  const ErrorCheck none = plan_error_check(s, head, 7999, 16, 64, 1);
  CHECK(none.heads.empty());
  CHECK(none.rows_per_head(s.seq) == 0);
  CHECK(plan_error_check(s, head, 4000, 2, 64, 1).rows.size() == 2);  // --check-rows 2 as asked
  CHECK(plan_error_check(s, head, 64000, 0, 64, 1).heads.empty());    // --check-rows 0
  CHECK(plan_error_check(s, head, 0, 16, 64, 1).heads.empty());       // --check-flops 0
}

TEST_CASE("every reference computes sampled rows as its whole computation does",
          "[harness][error_check]") {
  const Shape s{1, 2, 70, 8, 5};
  const ref::RowList rows = sample_rows(s.seq, 9, 16, test_seed());
  for (const Form& form : forms()) {
    INFO(form.name);
    const FormParams params = params_for(form, 16, 4);
    const HostProblem p = random_problem(s, form, test_seed(), params);
    const ref::Outputs whole = form.reference(p, params, {}),
                       sampled = form.reference(p, params, rows);
    CHECK(!sampled.o.data.empty());
    if (form.backward()) CHECK(!sampled.dq.data.empty());
    for (auto member : {&ref::Outputs::o, &ref::Outputs::dq, &ref::Outputs::dk, &ref::Outputs::dv,
                        &ref::Outputs::dg}) {
      const ref::Tensor &all = whole.*member, &some = sampled.*member;
      if (some.data.empty()) continue;
      REQUIRE(some.data.size() == all.data.size());
      const ErrorStats at_rows = compare(some, all, rows);
      CHECK(at_rows.max_abs <= 1e-12 * magnitude(all));
      // Rows not listed are not computed.
      for (int h = 0; h < s.heads; ++h)
        for (int t = 0; t < s.seq; ++t)
          if (!std::binary_search(rows.begin(), rows.end(), t))
            for (int d = 0; d < some.dim; ++d) REQUIRE(some(0, h, t, d) == 0);
    }
  }
}

TEMPLATE_LIST_TEST_CASE("a sampled check's error is the whole check's error at the sampled rows",
                        "[harness][error_check]", ExactConfigs) {
  using Exec = typename TestType::Exec;
  using P = typename TestType::Precision;
  const Shape s{2, 3, 150, 16, 8};
  for (const char* name : {"softmax/causal_fwd_bwd", "linear/chunk", "lightning/fwd_bwd",
                           "lion-s/chunk", "gsa/chunk_fwd_bwd"}) {
    const Form& form = form_named(name);
    INFO(name << " in " << precision_name<P>() << " on " << backend_name<Exec>());
    const FormParams params = params_for(form, 32, 4);
    MeasureOptions options;
    options.reps = 1;
    options.seed = test_seed();
    // Below one pair's whole reference: sampled rows of the first and last pair.
    const Cost cost = form.cost(s, params, sizeof(storage_t<P>));
    options.check_flops = cost.reference_flops / 2;
    const ResultRow row = measure_point<Exec, P>(form, s, params, options);
    REQUIRE(row.status == "ok");
    CHECK(row.err_heads == 2);
    CHECK(row.err_rows == options.check_rows);

    const ErrorCheck check =
        plan_error_check(s, cost.reference_flops, options.check_flops, options.check_rows,
                         row_boundary(params), options.seed);
    const HostProblem p = random_problem(s, form, options.seed, params);
    const ref::Outputs got = run_form<Exec, P>(form, p, params);
    const ref::Outputs whole = form.reference(p, params, {});
    // got and whole reshaped to the checked pairs, as measure_point downloads them.
    auto checked_pairs = [&](const ref::Outputs& all) {
      ref::Outputs part;
      for (auto member :
           {&ref::Outputs::o, &ref::Outputs::dq, &ref::Outputs::dk, &ref::Outputs::dv})
        if (!(all.*member).data.empty()) {
          ref::Problem holder;
          holder.q = all.*member;
          part.*member = heads_of(holder, check.heads).q;
        }
      return part;
    };
    ref::Outputs whole_at_rows = checked_pairs(whole);
    if (form.name == "softmax/causal_fwd_bwd" || form.name == "gsa/chunk_fwd_bwd")
      whole_at_rows.dk = whole_at_rows.dv = ref::Tensor();  // the sample checks o and dq
    const ErrorStats e = compare(checked_pairs(got), whole_at_rows, check.rows);
    // The same up to the references' own rounding (another order of sums).
    CHECK(row.max_abs_err == Approx(e.max_abs).epsilon(1e-6).margin(1e-14));
    CHECK(row.rel_l2_err == Approx(e.rel_l2).epsilon(1e-6).margin(1e-14));
  }
}

TEST_CASE("a sampled check finds at long L the drift a short check passes",
          "[harness][error_check]") {
  const Form form = truncating_form();
  MeasureOptions options;
  options.reps = 1;
  options.seed = test_seed();
  options.check_flops = 1e8;  // whole pairs up to L = 1250, sampled rows beyond
  const ResultRow short_row =
      measure_point<HostBackend, float>(form, {1, 2, 256, 8, 8}, {}, options);
  REQUIRE(short_row.status == "ok");
  CHECK(short_row.err_rows == 256);
  CHECK(short_row.rel_l2_err < precision_traits<float>::rel_l2_tolerance);
  CHECK(short_row.note.empty());

  const ResultRow long_row =
      measure_point<HostBackend, float>(form, {1, 2, 1 << 16, 8, 8}, {}, options);
  REQUIRE(long_row.status == "ok");
  CHECK(long_row.err_rows == 16);
  CHECK(long_row.rel_l2_err > 10 * precision_traits<float>::rel_l2_tolerance);
  CHECK(long_row.note.rfind("inaccurate", 0) == 0);
}
