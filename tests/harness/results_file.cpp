#include "results_file.hpp"

#include <catch2/catch.hpp>

#include <filesystem>

using attn::ResultFile;
using attn::ResultRow;

TEST_CASE("result rows and attributes round-trip through HDF5", "[harness][hdf5]") {
  const auto path = (std::filesystem::temp_directory_path() / "attn_results_roundtrip/sub/r.h5").string();
  std::filesystem::remove_all(std::filesystem::path(path).parent_path().parent_path());
  ResultRow a;
  a.form = "linear/chunk"; a.family = "linear"; a.backend = "openmp"; a.precision = "float";
  a.status = "ok"; a.batch = 4; a.heads = 32; a.seq = 32768; a.dk = 128; a.dv = 96; a.chunk = 64;
  a.reps = 10; a.time_median_s = 1.5e-3; a.time_min_s = 1.2e-3; a.time_max_s = 2e-3; a.time_mean_s = 1.6e-3;
  a.peak_bytes = 123456789012ull; a.flops = 1e12; a.bytes = 3e9; a.gflops = 666; a.gbps = 2000;
  a.err_heads = 2; a.max_abs_err = 1e-6; a.rel_l2_err = 3e-7;
  ResultRow b = a;
  b.form = "softmax/full"; b.status = "oom"; b.note = "inputs need 1 bytes, 0 free"; b.chunk = 0;
  {
    ResultFile file(path, {{"backend", "openmp"}, {"command_line", "bench sweep --seq 1k"}});
    file.append(a);
    file.append(b);
  }
  const auto rows = ResultFile::read(path);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].form == "linear/chunk");
  CHECK(rows[0].seq == 32768);
  CHECK(rows[0].dv == 96);
  CHECK(rows[0].peak_bytes == 123456789012ull);
  CHECK(rows[0].time_median_s == 1.5e-3);
  CHECK(rows[0].rel_l2_err == 3e-7);
  CHECK(rows[1].status == "oom");
  CHECK(rows[1].note == "inputs need 1 bytes, 0 free");
  const auto attributes = ResultFile::read_attributes(path);
  CHECK(attributes.at("backend") == "openmp");
  CHECK(attributes.at("command_line") == "bench sweep --seq 1k");
}

TEST_CASE("an unwritable result path is a one-line error", "[harness][hdf5][errors]") {
  CHECK_THROWS_WITH(ResultFile("/proc/attn/no.h5", {}), Catch::Contains("cannot"));
}
