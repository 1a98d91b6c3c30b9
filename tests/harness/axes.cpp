#include "axes.hpp"

#include <fmt/core.h>
#include <catch2/catch.hpp>

#include "console.hpp"
#include "plan.hpp"

using attn::parse_axis;

TEST_CASE("axis specs: ranges, lists and suffixes", "[harness][axes]") {
  CHECK(parse_axis("seq", "1k..16k").values ==
        std::vector<long long>{1024, 2048, 4096, 8192, 16384});
  CHECK(parse_axis("seq", "1k..128k").values.size() == 8);
  CHECK(parse_axis("seq", "1k,3k,5000").values == std::vector<long long>{1024, 3072, 5000});
  CHECK(parse_axis("chunk", "16..256").values == std::vector<long long>{16, 32, 64, 128, 256});
  CHECK(parse_axis("chunk", "24..100").values == std::vector<long long>{24, 48, 96});
  CHECK(parse_axis("seq", " 1 , 2m ").values == std::vector<long long>{1, 2 * 1024 * 1024});
  CHECK(parse_axis("seq", "7..7").values == std::vector<long long>{7});
}

TEST_CASE("linear ranges step by a given amount", "[harness][axes]") {
  CHECK(parse_axis("seq", "1k..8k:1k").values ==
        std::vector<long long>{1024, 2048, 3072, 4096, 5120, 6144, 7168, 8192});
  CHECK(parse_axis("seq", "100..350:100").values ==
        std::vector<long long>{100, 200, 300});  // stops at or below b
  CHECK(parse_axis("chunk", "16..16:8").values == std::vector<long long>{16});
  CHECK(parse_axis("seq", "1k..2k:1k,64").values == std::vector<long long>{1024, 2048, 64});
}

TEST_CASE("bad axis specs name the axis and the problem", "[harness][axes][errors]") {
  CHECK_THROWS_WITH(parse_axis("seq", ""), Catch::Contains("--seq") && Catch::Contains("empty"));
  CHECK_THROWS_WITH(parse_axis("seq", "1k.."), Catch::Contains("not a positive whole number"));
  CHECK_THROWS_WITH(parse_axis("seq", "abc"), Catch::Contains("not a positive whole number"));
  CHECK_THROWS_WITH(parse_axis("seq", "16k..1k"), Catch::Contains("runs backwards"));
  CHECK_THROWS_WITH(parse_axis("seq", "1,,2"), Catch::Contains("empty item"));
  CHECK_THROWS_WITH(parse_axis("chunk", "0"),
                    Catch::Contains("--chunk") && Catch::Contains("at least 1"));
  CHECK_THROWS_WITH(parse_axis("batch", "-1"), Catch::Contains("not a positive whole number"));
  CHECK_THROWS_WITH(parse_axis("seq", "4x"), Catch::Contains("unknown suffix"));
  CHECK_THROWS_WITH(parse_axis("seq", "4096m"), Catch::Contains("too large"));
  CHECK_THROWS_WITH(parse_axis("seq", "1k..8k:0"), Catch::Contains("needs a step of 1 or more"));
  CHECK_THROWS_WITH(parse_axis("seq", "1k..8k:"), Catch::Contains("not a positive whole number"));
  CHECK_THROWS_WITH(parse_axis("seq", "1k..8k:x"), Catch::Contains("not a positive whole number"));
  CHECK_THROWS_WITH(parse_axis("seq", "8k..1k:1k"), Catch::Contains("runs backwards"));
  CHECK_THROWS_WITH(parse_axis("seq", "1k:1k"), Catch::Contains("unknown suffix"));
}

namespace {

// A sweep of `forms` in `precisions` at B=2, H=3, d=16 (dv following dk), over
// the given seq, slots and chunk specs; every other declared parameter at
// bench's default, as bench sweeps them.
attn::Sweep small_sweep(std::vector<const attn::Form*> forms, std::vector<std::string> precisions,
                        const char* seq, const char* slots, const char* chunk) {
  attn::Sweep sweep;
  sweep.forms = std::move(forms);
  sweep.precisions = std::move(precisions);
  sweep.batch = parse_axis("batch", "2");
  sweep.heads = parse_axis("heads", "3");
  sweep.dk = parse_axis("dk", "16");
  sweep.dv = {"dv", {0}};  // dv follows dk
  sweep.seq = parse_axis("seq", seq);
  for (const attn::Param& param : attn::declared_params())
    sweep.param_values[param.name] = parse_axis(param.name, param.default_values);
  sweep.param_values["slots"] = parse_axis("slots", slots);
  sweep.param_values["chunk"] = parse_axis("chunk", chunk);
  return sweep;
}

}  // namespace

TEST_CASE("planned rows carry every declared axis, 0 where a form does not take it",
          "[harness][axes]") {
  const auto points =
      attn::plan_points(small_sweep({attn::find_form("softmax/full"), attn::find_form("gsa/chunk")},
                                    {"float"}, "64", "8,16", "32"),
                        "openmp");
  REQUIRE(points.size() == 3);  // softmax/full once (no slots, no chunk), gsa/chunk per slots
  for (const auto& p : points) CHECK(attn::axes_of({p.planned}) == attn::axis_columns());
  const attn::ResultRow& softmax = points[0].planned;
  CHECK(softmax.form == "softmax/full");
  for (const auto& [axis, value] : {std::pair{"batch", 2},
                                    {"heads", 3},
                                    {"dk", 16},
                                    {"dv", 16},
                                    {"seq", 64},
                                    {"slots", 0},
                                    {"chunk", 0}})
    CHECK(softmax.axis(axis) == value);
  CHECK(points[2].planned.axis("slots") == 16);
  CHECK(points[2].planned.axis("chunk") == 32);
}

TEST_CASE("planned points run by shape, L ascending, then form, slots, precision and chunk",
          "[harness][axes]") {
  const attn::Sweep sweep =
      small_sweep({attn::find_form("gsa/chunk"), attn::find_form("softmax/full")},
                  {"bf16", "float"}, "256,64", "8,16", "16,32");
  std::vector<std::string> order;
  for (const auto& p : attn::plan_points(sweep, "openmp"))
    order.push_back(fmt::format("{} {} m{} {} c{}", p.shape.seq, p.form->name,
                                p.params.axis("slots"), p.precision, p.params.axis("chunk")));
  std::vector<std::string> want;
  for (int seq : {64, 256}) {
    for (int slots : {8, 16})
      for (const char* precision : {"bf16", "float"})
        for (int chunk : {16, 32})
          want.push_back(fmt::format("{} gsa/chunk m{} {} c{}", seq, slots, precision, chunk));
    for (const char* precision : {"bf16", "float"})
      want.push_back(fmt::format("{} softmax/full m0 {} c0", seq, precision));
  }
  CHECK(order == want);
}

TEST_CASE(
    "the console's table has a column for every declared parameter, its values under its name",
    "[harness][axes]") {
  const attn::Sweep sweep = small_sweep({attn::find_form("gsa/chunk")}, {"float"}, "64", "8", "16");
  const attn::ResultRow row = attn::plan_points(sweep, "openmp").front().planned;
  const std::string header = attn::table_header(), line = attn::table_row(row);
  for (const attn::Param& param : attn::declared_params()) {
    INFO(param.name << "\n" << header << "\n" << line);
    const std::size_t heading = header.find(" " + param.name + " ");
    REQUIRE(heading != std::string::npos);
    const std::size_t end = heading + 1 + param.name.size();  // columns are right-aligned
    const std::string value = std::to_string(row.axis(param.name));
    REQUIRE(end >= value.size() + 1);
    CHECK(line.substr(end - value.size() - 1, value.size() + 1) == " " + value);
  }
}
