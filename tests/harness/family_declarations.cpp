// What a family declares in its own file reaches the harness with no central
// edit: a swept parameter of its own (an axis of the sweep, a value of
// FormParams by name, a word of the reference's cache key) and an input of
// its own (drawn by its own draw, held by name in ref::Problem::extras and
// Inputs::extras, read by its kernel and its reference). The form here is a
// test-only one, not registered.
#include <cmath>

#include "axes.hpp"
#include "forms/check.hpp"
#include "measure.hpp"
#include "sweep_config.hpp"

namespace attn::test {

// o = repeats * gain * v: `repeats` a parameter no registered form takes, and
// gain, [B, H, L, 1], an input no registered form has.
const Param repeats{"repeats", "times v is added up, for the test form", "1", "does not repeat"};
const Draw gain_draw{"gain", [](ref::Tensor& z, const OptionValues&) {
                       for_each_element(z, [](double x) { return std::exp(x / 4); });
                     }};
constexpr int gain_stream = 11;

struct ScaledByGain {
  using precisions = Precisions;
  template <class Exec, class P>
  static void run(const Exec& exec, const Inputs<Exec, storage_t<P>>& x, const FormParams& p) {
    using S = storage_t<P>;
    using A = accum_t<P>;
    const auto v = x.v, o = x.o, gain = x.extra("gain");
    const A times = A(p.axis("repeats"));
    Kokkos::parallel_for(
        "scaled by gain",
        Kokkos::MDRangePolicy<Exec, Kokkos::Rank<3>>(
            exec, {0, 0, 0}, {int(v.extent(0)), int(v.extent(1)), int(v.extent(2))}),
        KOKKOS_LAMBDA(int b, int h, int t) {
          for (int d = 0; d < int(v.extent(3)); ++d)
            o(b, h, t, d) = S(times * A(gain(b, h, t, 0)) * A(v(b, h, t, d)));
        });
  }
};

ref::Outputs scaled_by_gain_reference(const ref::Problem& p, const FormParams& params,
                                      const ref::RowList&) {
  ref::Tensor o = p.v;
  const ref::Tensor& gain = p.extra("gain");
  for (int b = 0; b < o.batch; ++b)
    for (int h = 0; h < o.heads; ++h)
      for (int t = 0; t < o.seq; ++t)
        for (int d = 0; d < o.dim; ++d) o(b, h, t, d) *= params.axis("repeats") * gain(b, h, t, 0);
  return ref::output_only(std::move(o));
}

Cost scaled_by_gain_cost(const Shape& s, const FormParams&, std::size_t scalar_bytes) {
  const double n = double(s.batch) * s.heads * s.seq * s.dv;
  return {2 * n, 2 * n * scalar_bytes, 2 * double(s.seq) * s.dv};
}

std::string no_vectors(const FormParams&) { return ""; }

Form scaled_by_gain_form(const Param& param = repeats) {
  return {
      "test/scaled_by_gain",
      "test",
      "o = repeats gain v",
      Direction::bidirectional,
      {param, Param::chunk},
      {},
      attention_tensors(
          normal_draw,
          {{"gain", {Size::batch, Size::heads, Size::seq}, Role::input, &gain_draw, gain_stream}}),
      MemoryKind::io_only,
      runners_of<ScaledByGain>(),
      &scaled_by_gain_reference,
      &scaled_by_gain_cost,
      &no_vectors};
}

}  // namespace attn::test

using namespace attn;
using namespace attn::test;

TEST_CASE("a parameter a form declares is an axis of the sweep, valued by name",
          "[harness][axes]") {
  const Form form = scaled_by_gain_form();
  const std::vector<Param> params =
      declared_params({find_form("gsa/chunk"), find_form("linear/chunk"), &form});
  std::vector<std::string> names;
  for (const Param& p : params) names.push_back(p.name);
  CHECK(names == std::vector<std::string>{"chunk", "slots", "repeats"});

  // Read by the reference, so swept outside the chunk, which stays innermost.
  const std::vector<SweptAxis> axes = swept_axes(params);
  std::vector<std::string> columns;
  for (const SweptAxis& axis : axes) columns.push_back(axis.name);
  CHECK(columns ==
        std::vector<std::string>{"batch", "heads", "dk", "dv", "seq", "slots", "repeats", "chunk"});

  Shape shape{};
  FormParams values;
  for (std::size_t i = 0; i < axes.size(); ++i) axes[i].set(shape, values, int(i) + 1);
  CHECK(shape.seq == 5);
  CHECK(values.axis("slots") == 6);
  CHECK(values.axis("repeats") == 7);
  CHECK(values.axis("chunk") == 8);
  CHECK(values.axis("not declared") == 0);
  for (std::size_t i = 0; i < axes.size(); ++i) CHECK(axes[i].get(shape, values) == int(i) + 1);

  Sweep sweep;
  sweep.param_values["repeats"] = parse_axis("repeats", "1..4");
  CHECK(axes[6].values(sweep).values == std::vector<long long>{1, 2, 4});
  CHECK(form.takes(repeats));
  CHECK_FALSE(find_form("gsa/chunk")->takes(repeats));
  CHECK(axes[6].param->not_taken == "does not repeat");

  // One flag and one column per name: the same name declared otherwise is refused.
  Param other = repeats;
  other.default_values = "2";
  const Form unlike = scaled_by_gain_form(other);
  CHECK_THROWS_AS(declared_params({&form, &unlike}), std::logic_error);
}

TEMPLATE_LIST_TEST_CASE("an input a family declares is drawn, uploaded and read by name",
                        "[harness][declarations]", Configs) {
  using Exec = typename TestType::Exec;
  using P = typename TestType::Precision;
  using T = typename TestType::Scalar;
  const Form form = scaled_by_gain_form();
  const Shape s{2, 3, 17, 4, 5};
  FormParams params;
  params.set_axis("repeats", 3);
  const HostProblem p = random_problem(s, form, test_seed(), params);
  INFO(precision_name<P>() << " on " << backend_name<Exec>());

  // Drawn from its own stream by its own draw, held by name beside the named members.
  REQUIRE(p.extras.size() == 1);
  const ref::Tensor& gain = p.extra("gain");
  CHECK(&problem_tensor(p, "gain") == &gain);
  CHECK((gain.batch == 2 && gain.heads == 3 && gain.seq == 17 && gain.dim == 1));
  for (double g : gain.data) CHECK(g > 0);
  CHECK(p.log_gate.data.empty());
  CHECK_THROWS_AS(problem_tensor(p, "not declared"), std::out_of_range);

  // Uploaded by name, in the precision's storage.
  const Inputs<Exec, T> x = upload<Exec, T>(p);
  const ref::Tensor uploaded = to_host(x.extra("gain"));
  for (std::size_t i = 0; i < gain.data.size(); ++i)
    REQUIRE(uploaded.data[i] == double(arithmetic_t<T>(T(arithmetic_t<T>(gain.data[i])))));
  CHECK_THROWS_AS(x.extra("not declared"), std::logic_error);

  // The kernel and the reference read the input and the parameter by name.
  const ref::Outputs want = form.reference(p, params, {});
  CHECK(want.o(1, 2, 16, 4) == 3 * gain(1, 2, 16, 0) * p.v(1, 2, 16, 4));
  check_close<P>(run_form<Exec, P>(form, p, params), want);

  MeasureOptions options;
  options.reps = 2;
  const ResultRow row = measure_point<Exec, P>(form, s, params, options);
  CHECK(row.status == "ok");
  CHECK(row.rel_l2_err <= Tolerance<P>::rel_l2);
}

TEST_CASE("the point cache keys the reference on a declared parameter the reference reads",
          "[harness][declarations]") {
  const Form form = scaled_by_gain_form();
  const Shape s{1, 2, 8, 4, 4};
  FormParams once, twice;
  once.set_axis("repeats", 1);
  twice.set_axis("repeats", 2);
  PointCache cache;
  cache.select(s, form, test_seed(), once);
  const ref::Tensor o1 = cache.reference(form, once, {}).o;
  cache.select(s, form, test_seed(), twice);
  const ref::Tensor o2 = cache.reference(form, twice, {}).o;
  REQUIRE(o1.data.size() == o2.data.size());
  for (std::size_t i = 0; i < o1.data.size(); ++i) REQUIRE(o2.data[i] == 2 * o1.data[i]);
}
