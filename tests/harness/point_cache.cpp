// PointCache: consecutive sweep points share every input they draw alike, and
// their reference outputs where only the chunk size differs; anything else is
// drawn anew.
#include "measure.hpp"

#include <catch2/catch.hpp>

#include "forms/check.hpp"

namespace {

using namespace attn;
using namespace attn::test;

bool same_values(const ref::Tensor& a, const ref::Tensor& b) { return a.data == b.data; }

TEST_CASE("the point cache reuses the inputs drawn alike, and references across chunk sizes",
          "[harness][measure]") {
  const Shape s{1, 2, 37, 8, 5};
  const std::uint64_t seed = test_seed();
  const Form& gsa = *find_form("gsa/chunk");
  FormParams p16 = params_for(gsa, 16, 4), p32 = p16;
  p32.set_axis("chunk", 32);
  const ErrorCheck check{{{0, 1}}, {}};

  PointCache cache;
  cache.select(s, gsa, seed, p16);
  CHECK(cache.reusable_bytes() == 0);
  const HostProblem& first = cache.problem();
  const HostProblem drawn = random_problem(s, gsa, seed, p16);
  CHECK(same_values(first.q, drawn.q));
  CHECK(same_values(first.log_gate, drawn.log_gate));
  const ref::Outputs& want = cache.reference(gsa, p16, check);
  CHECK(same_values(want.o, gsa.reference(heads_of(drawn, check.heads), p16, {}).o));

  // Another chunk size: the same objects, not drawn or computed again.
  cache.select(s, gsa, seed, p32);
  CHECK(cache.reusable_bytes() > 0);
  CHECK(&cache.problem() == &first);
  CHECK(&cache.reference(gsa, p32, check) == &want);

  // Another slot count: the same q, k, v, gates of another width, and their own reference.
  const double* q_values = first.q.data.data();
  FormParams p_slots = p16;
  p_slots.set_axis("slots", 7);
  cache.select(s, gsa, seed, p_slots);
  CHECK(cache.reusable_bytes() ==
        double(first.q.data.size() + first.k.data.size() + first.v.data.size()) * sizeof(double));
  CHECK(cache.problem().q.data.data() == q_values);
  CHECK(cache.problem().log_gate.dim == 7);
  CHECK(same_values(cache.problem().log_gate, random_problem(s, gsa, seed, p_slots).log_gate));
  CHECK(same_values(
      cache.reference(gsa, p_slots, check).o,
      gsa.reference(heads_of(random_problem(s, gsa, seed, p_slots), check.heads), p_slots, {}).o));

  // The forward+backward form of the family: its inputs kept, d_o drawn, each
  // as random_problem draws it for that form; the reference its own.
  const Form& gsa_fwd_bwd = *find_form("gsa/chunk_fwd_bwd");
  cache.select(s, gsa_fwd_bwd, seed, p_slots);
  CHECK(cache.reusable_bytes() > 0);
  const HostProblem& with_d_o = cache.problem();
  CHECK(with_d_o.q.data.data() == q_values);
  const HostProblem fwd_bwd_drawn = random_problem(s, gsa_fwd_bwd, seed, p_slots);
  for (const char* name : {"q", "k", "v", "log_gate", "d_o"})
    CHECK(same_values(problem_tensor(with_d_o, name), problem_tensor(fwd_bwd_drawn, name)));
  CHECK(same_values(cache.reference(gsa_fwd_bwd, p_slots, check).dq,
                    gsa_fwd_bwd.reference(heads_of(fwd_bwd_drawn, check.heads), p_slots, {}).dq));

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
