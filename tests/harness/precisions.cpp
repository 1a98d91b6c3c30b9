// The precisions around the kernels: bf16's conversions, the registry's
// per-precision runners, and a form declaring every precision (a test-only
// one, not registered) going through upload, run, download and measure_point.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "forms/check.hpp"
#include "measure.hpp"

namespace attn::test {

// o = 2 v, in the precision's accumulation type: every precision, so that the
// plumbing is tested before any registered form runs in tf32 or bf16.
struct Doubling {
  using precisions = Precisions;
  template <class Exec, class P>
  static void run(const Exec& exec, const Inputs<Exec, storage_t<P>>& x, const FormParams&) {
    using S = storage_t<P>;
    using A = accum_t<P>;
    const S* v = x.v.data();
    S* o = x.o.data();
    Kokkos::parallel_for(
        "doubling", Kokkos::RangePolicy<Exec>(exec, 0, x.v.size()),
        KOKKOS_LAMBDA(std::size_t i) { o[i] = S(A(v[i]) * A(2)); });
  }
};
// The same kernel without a declaration: float and double only.
struct ExactDoubling {
  template <class Exec, class P>
  static void run(const Exec& exec, const Inputs<Exec, storage_t<P>>& x, const FormParams& params) {
    Doubling::run<Exec, P>(exec, x, params);
  }
};

ref::Outputs doubling_reference(const ref::Problem& p, const FormParams&, const ref::RowList&) {
  ref::Outputs out{p.v, {}, {}, {}, {}};
  for (double& x : out.o.data) x *= 2;
  return out;
}

Cost doubling_cost(const Shape& s, const FormParams&, std::size_t scalar_bytes) {
  const double n = double(s.batch) * s.heads * s.seq * s.dv;
  return {n, 2 * n * scalar_bytes, double(s.seq) * s.dv};
}

std::string no_test_vectors(const FormParams&) { return ""; }

template <class Op>
Form doubling_form() {
  return {"test/doubling",
          "test",
          "o = 2 v",
          Direction::bidirectional,
          {},
          {},
          attention_tensors(normal_draw),
          MemoryKind::io_only,
          runners_of<Op>(),
          &doubling_reference,
          &doubling_cost,
          &no_test_vectors};
}

}  // namespace attn::test

using namespace attn;
using namespace attn::test;

namespace {

std::uint32_t bits_of(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
float float_of(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

}  // namespace

TEST_CASE("bf16 rounds to nearest even and keeps what it can represent", "[harness][precision]") {
  // Exactly representable: 8 significant bits, normal and subnormal, both signs.
  for (float x :
       {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 1.5f, 3.140625f, 255.0f, -1.0e-3f, 65280.0f,
        std::numeric_limits<float>::min(), float_of(0x00010000u), float_of(0x7f7f0000u)}) {
    const float rounded = float_of(bits_of(x) & 0xffff0000u);
    INFO("x = " << x);
    CHECK(float(bf16(rounded)) == rounded);
    CHECK(bits_of(float(bf16(rounded))) == bits_of(rounded));  // -0 stays -0
    CHECK(float(bf16(double(rounded))) == rounded);
  }
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: to the even one, 1.
  CHECK(float(bf16(1.0f + 0x1p-8f)) == 1.0f);
  // 1 + 3 * 2^-8 lies halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
  CHECK(float(bf16(1.0f + 3 * 0x1p-8f)) == 1.0f + 0x1p-6f);
  // Just off halfway: to the nearer.
  CHECK(float(bf16(1.0f + 0x1p-8f + 0x1p-20f)) == 1.0f + 0x1p-7f);
  CHECK(float(bf16(1.0f + 0x1p-8f - 0x1p-20f)) == 1.0f);
  CHECK(float(bf16(-(1.0f + 3 * 0x1p-8f))) == -(1.0f + 0x1p-6f));
  // The largest float rounds up past bf16's largest finite value: inf.
  CHECK(float(bf16(std::numeric_limits<float>::max())) == std::numeric_limits<float>::infinity());
  // Infinities and NaN survive (a NaN stays a NaN, whatever its payload).
  CHECK(float(bf16(std::numeric_limits<float>::infinity())) ==
        std::numeric_limits<float>::infinity());
  CHECK(float(bf16(-std::numeric_limits<double>::infinity())) ==
        -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(float(bf16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(std::isnan(
      float(bf16(float_of(0x7f800001u)))));  // a NaN whose payload lies in the dropped bits
  CHECK(std::isnan(float(bf16(std::nan("")))));
}

TEST_CASE("TF32 rounding keeps 10 mantissa bits, to nearest even", "[harness][precision]") {
  // Exactly representable values stay, both signs, subnormal too.
  for (std::uint32_t u : {0x3f800000u, 0xbf802000u, 0x00012000u, 0x80000000u, 0x7f7fe000u})
    CHECK(bits_of(round_to_tf32(float_of(u))) == u);
  // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: to the even one, 1.
  CHECK(round_to_tf32(1.0f + 0x1p-11f) == 1.0f);
  // 1 + 3 * 2^-11 lies halfway between 1 + 2^-10 (odd) and 1 + 2^-9 (even).
  CHECK(round_to_tf32(1.0f + 3 * 0x1p-11f) == 1.0f + 0x1p-9f);
  CHECK(round_to_tf32(-(1.0f + 3 * 0x1p-11f)) == -(1.0f + 0x1p-9f));
  // Just off halfway: to the nearer.
  CHECK(round_to_tf32(1.0f + 0x1p-11f + 0x1p-23f) == 1.0f + 0x1p-10f);
  CHECK(round_to_tf32(1.0f + 0x1p-11f - 0x1p-23f) == 1.0f);
  // The largest float rounds up past TF32's largest finite value: inf.
  CHECK(round_to_tf32(std::numeric_limits<float>::max()) == std::numeric_limits<float>::infinity());
  // Infinities and NaN survive.
  CHECK(round_to_tf32(-std::numeric_limits<float>::infinity()) ==
        -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(round_to_tf32(std::numeric_limits<float>::quiet_NaN())));
  CHECK(std::isnan(round_to_tf32(float_of(0x7f800001u))));
  CHECK(std::isnan(round_to_tf32(float_of(0x7fffffffu))));
}

TEST_CASE("precision names, storage sizes and the registry's kernels per precision",
          "[harness][precision]") {
  CHECK(precision_names() == std::vector<std::string>{"float", "double", "tf32", "bf16"});
  CHECK(storage_bytes("float") == 4);
  CHECK(storage_bytes("tf32") == 4);
  CHECK(storage_bytes("bf16") == 2);
  CHECK(storage_bytes("double") == 8);
  CHECK_THROWS_AS(storage_bytes("half"), std::invalid_argument);
  for (const Form& form : forms()) {
    INFO(form.name);
    CHECK(form.supports<float>());  // every form runs in float and double
    CHECK(form.supports<double>());
    CHECK_FALSE(form.supports("half"));
    const std::vector<std::string> listed = form.precisions();
    for (const auto& name : precision_names())
      CHECK(form.supports(name) == (std::find(listed.begin(), listed.end(), name) != listed.end()));
    // Every backend has the same kernels.
    for_each_precision([&](auto* tag) {
      using P = std::remove_pointer_t<decltype(tag)>;
      const bool on_host = form.supports<P>();
      CHECK(form.supports(precision_name<P>()) == on_host);
      for_each_type(static_cast<Backends*>(nullptr), [&](auto* exec) {
        using Exec = std::remove_pointer_t<decltype(exec)>;
        CHECK((form.runner<Exec, P>() != nullptr) == on_host);
      });
    });
  }
  const Form all = doubling_form<Doubling>(), exact = doubling_form<ExactDoubling>();
  CHECK(all.precisions() == precision_names());
  CHECK(exact.precisions() == std::vector<std::string>{"float", "double"});
  CHECK(exact.runner<HostBackend, bf16>() == nullptr);
  CHECK(exact.runner<HostBackend, tf32>() == nullptr);
}

TEMPLATE_LIST_TEST_CASE("a form declaring every precision runs and is measured in each",
                        "[harness][precision]", Configs) {
  using Exec = typename TestType::Exec;
  using P = typename TestType::Precision;
  using T = typename TestType::Scalar;
  const Form form = doubling_form<Doubling>();
  const Shape s{2, 3, 37, 8, 5};
  const HostProblem p = random_problem(s, form, test_seed());
  INFO(precision_name<P>() << " on " << backend_name<Exec>());

  // Stored as storage_t<P>: v comes back as it was rounded on the way up.
  const Inputs<Exec, T> x = upload<Exec, T>(p);
  const ref::Tensor v = to_host(x.v);
  for (std::size_t i = 0; i < v.data.size(); ++i)
    REQUIRE(v.data[i] == double(arithmetic_t<T>(T(arithmetic_t<T>(p.v.data[i])))));
  const double rounding = compare(v, p.v).rel_l2;
  if constexpr (std::is_same_v<T, bf16>)
    CHECK(rounding > 1e-4);  // 8 significant bits
  else
    CHECK(rounding < 1e-7);

  const ref::Outputs got = run_form<Exec, P>(form, p, {});
  check_close<P>(got, form.reference(p, {}, {}));

  MeasureOptions options;
  options.reps = 2;
  const ResultRow row = measure_point<Exec, P>(form, s, {}, options);
  CHECK(row.status == "ok");
  CHECK(row.precision == precision_name<P>());
  CHECK(row.bytes == 2.0 * 2 * 3 * 37 * 5 * sizeof(T));
  CHECK(row.err_heads == 6);
  CHECK(row.rel_l2_err <= Tolerance<P>::rel_l2);
}

TEMPLATE_LIST_TEST_CASE("all_finite sees inf and NaN in every storage type", "[harness][precision]",
                        Configs) {
  using Exec = typename TestType::Exec;
  using T = typename TestType::Scalar;
  const HostProblem p = random_problem({1, 1, 4, 2, 2}, doubling_form<Doubling>(), 1);
  Inputs<Exec, T> x = upload<Exec, T>(p);
  Kokkos::deep_copy(x.o, T(arithmetic_t<T>(1)));
  CHECK(all_finite(Exec(), x));
  for (double bad :
       {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
        std::numeric_limits<double>::quiet_NaN()}) {
    auto mirror = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), x.o);
    mirror(0, 0, 3, 1) = T(arithmetic_t<T>(bad));
    Kokkos::deep_copy(x.o, mirror);
    INFO(bad);
    CHECK_FALSE(all_finite(Exec(), x));
  }
}
