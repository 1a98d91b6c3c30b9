// PointCache: consecutive sweep points that differ only in the chunk size
// share their drawn inputs and reference outputs; anything else draws anew.
#include "measure.hpp"

#include <catch2/catch.hpp>

#include "forms/check.hpp"

namespace {

using namespace attn;
using namespace attn::test;

bool same_values(const ref::Tensor& a, const ref::Tensor& b) { return a.data == b.data; }

TEST_CASE("the point cache reuses inputs and references across chunk sizes only",
          "[harness][measure]") {
  const Shape s{1, 2, 37, 8, 5};
  const std::uint64_t seed = test_seed();
  const Form& gsa = *find_form("gsa/chunk");
  FormParams p16 = params_for(gsa, 16, 4), p32 = p16;
  p32.chunk = 32;
  const ref::HeadList heads{{0, 1}};

  PointCache cache;
  cache.select(s, gsa, seed, p16);
  CHECK(cache.reusable_bytes() == 0);
  const HostProblem& first = cache.problem();
  const HostProblem drawn = random_problem(s, gsa, seed, p16);
  CHECK(same_values(first.q, drawn.q));
  CHECK(same_values(first.log_gate, drawn.log_gate));
  const ref::Outputs& want = cache.reference(gsa, p16, heads);
  CHECK(same_values(want.o, gsa.reference(drawn, p16, heads).o));

  // Another chunk size: the same objects, not drawn or computed again.
  cache.select(s, gsa, seed, p32);
  CHECK(cache.reusable_bytes() > 0);
  CHECK(&cache.problem() == &first);
  CHECK(&cache.reference(gsa, p32, heads) == &want);

  // Another slot count: gates of another width, and their own reference.
  FormParams p_slots = p16;
  p_slots.slots = 7;
  cache.select(s, gsa, seed, p_slots);
  CHECK(cache.reusable_bytes() == 0);
  CHECK(cache.problem().log_gate.dim == 7);
  CHECK(same_values(cache.problem().log_gate, random_problem(s, gsa, seed, p_slots).log_gate));
  CHECK(same_values(cache.reference(gsa, p_slots, heads).o,
                    gsa.reference(random_problem(s, gsa, seed, p_slots), p_slots, heads).o));

  // Another value of an option the draws read: drawn anew.
  FormParams cooler = p_slots;
  cooler.options.set("gate-temperature", 2.0);
  cache.select(s, gsa, seed, cooler);
  CHECK(cache.reusable_bytes() == 0);
  CHECK(same_values(cache.problem().log_gate, random_problem(s, gsa, seed, cooler).log_gate));
  CHECK(!same_values(cache.problem().log_gate, random_problem(s, gsa, seed, p_slots).log_gate));

  // Another seed or another form's inputs: drawn anew.
  cache.select(s, gsa, seed + 1, p_slots);
  CHECK(cache.reusable_bytes() == 0);
  CHECK(!same_values(cache.problem().q, drawn.q));
  const Form& lion = *find_form("lion-s/chunk");
  const FormParams lion_params = params_for(lion, 16, 4);
  cache.select(s, lion, seed, lion_params);
  CHECK(cache.reusable_bytes() == 0);
  CHECK(
      same_values(cache.problem().log_decay, random_problem(s, lion, seed, lion_params).log_decay));
}

}  // namespace
