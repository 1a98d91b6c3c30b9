// Points whose sizes overflow the kernels' int indices are refused before
// anything is allocated or the memory check is asked (on a machine with the
// memory, that check passes and the kernels would run on wrapped indices).
#include "measure.hpp"

#include <catch2/catch.hpp>

#include <limits>

namespace {

using namespace attn;

constexpr int int_max = std::numeric_limits<int>::max();

FormParams chunk_and_slots(int chunk, int slots) {
  FormParams params;
  params.set_axis("chunk", chunk);
  params.set_axis("slots", slots);
  return params;
}

TEST_CASE("int_overflow names the first count beyond INT_MAX", "[harness][measure]") {
  const Form& softmax = *find_form("softmax/full");
  const Form& gsa = *find_form("gsa/chunk");
  const Form& materialised = *find_form("lion-d/materialised");
  const FormParams none, slots = chunk_and_slots(64, 64), many_slots = chunk_and_slots(64, 1048576);
  // An H100-sized point: 2^32 elements per tensor, which views index with size_t.
  CHECK(int_overflow(softmax, {8, 64, 65536, 128, 128}, none).empty());
  CHECK(int_overflow(gsa, {8, 64, 4096, 128, 128}, slots).empty());
  // (batch, head) pairs: 2^31 - 1 fit, 2^31 do not.
  CHECK(int_overflow(softmax, {1, int_max, 1, 1, 1}, none).empty());
  CHECK(int_overflow(softmax, {32768, 65536, 1, 1, 1}, none) ==
        "B x H = 2147483648 is beyond the kernels' int indices (at most 2147483647)");
  // Each axis fits, their product does not.
  CHECK(int_overflow(softmax, {1024, 1024, 2048, 1, 1}, none).rfind("B x H x L = 2147483648 ", 0) ==
        0);
  CHECK(int_overflow(softmax, {1024, 1024, 2047, 1, 1}, none).empty());
  CHECK(int_overflow(gsa, {1024, 1024, 1, 1, 1}, many_slots)
            .rfind("B x H x slots = 1099511627776 ", 0) == 0);
  // A materialised form's L x L products in 32 x 32 tiles: (64k/32)^2 x 512 = 2^31.
  CHECK(int_overflow(materialised, {1, 512, 65536, 1, 1}, none)
            .rfind("B x H x (L/32)^2 = 2147483648 ", 0) == 0);
  CHECK(int_overflow(softmax, {1, 512, 65536, 1, 1}, none).empty());
  // Products beyond 64 bits are still counted, not wrapped.
  CHECK(int_overflow(softmax, {int_max, int_max, int_max, int_max, int_max}, none)
            .rfind("B x H = ", 0) == 0);
}

TEST_CASE("measure_point refuses a point whose sizes overflow int, before its memory check",
          "[harness][measure]") {
  // 2^32 (batch, head) pairs of one token: 96 GiB of float64 inputs, which a
  // large host would hold; an error row that says why, on any machine.
  const Form& form = *find_form("softmax/full");
  MeasureOptions options;
  options.check_flops = 0;
  const ResultRow row =
      measure_point<HostBackend, float>(form, {65536, 65536, 1, 1, 1}, {}, options);
  CHECK(row.status == "error");
  CHECK(row.note ==
        "not run: B x H = 4294967296 is beyond the kernels' int indices (at most 2147483647)");
  CHECK(row.peak_bytes == 0);
  CHECK(row.reps == 0);
}

}  // namespace
