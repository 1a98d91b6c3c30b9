#include "results_file.hpp"

#include <hdf5.h>
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "axes.hpp"

using attn::ResultFile;
using attn::ResultRow;

namespace {

// A folder of the checkout: where the build's checkout has it, else relative
// to the current directory (a test binary copied to another machine and run
// from a copy of the repository's root, as on the GPU machine).
std::string checkout_folder(const char* built, const char* relative) {
  std::error_code error;
  return std::filesystem::is_directory(built, error) ? built : relative;
}
const std::string fixtures = checkout_folder(ATTN_FIXTURES_DIR, "tests/data/fixtures");
const std::string committed_results = checkout_folder(ATTN_RESULTS_DIR, "results");

}  // namespace

TEST_CASE("result rows and attributes round-trip through HDF5", "[harness][hdf5]") {
  const auto path =
      (std::filesystem::temp_directory_path() / "attn_results_roundtrip/sub/r.h5").string();
  std::filesystem::remove_all(std::filesystem::path(path).parent_path().parent_path());
  ResultRow a;
  a.form = "linear/chunk";
  a.family = "linear";
  a.backend = "openmp";
  a.precision = "float";
  a.status = "ok";
  // Every axis of this build, in the reverse of its columns' order, each its own value.
  attn::AxisValues written;
  for (const auto& name : attn::axis_columns())
    written.emplace_back(name, 1000 + int(written.size()));
  a.axes.assign(written.rbegin(), written.rend());
  a.reps = 10;
  a.time_median_s = 1.5e-3;
  a.time_min_s = 1.2e-3;
  a.time_max_s = 2e-3;
  a.time_mean_s = 1.6e-3;
  a.peak_bytes = 123456789012ull;
  a.flops = 1e12;
  a.bytes = 3e9;
  a.gflops = 666;
  a.gbps = 2000;
  a.err_heads = 2;
  a.max_abs_err = 1e-6;
  a.rel_l2_err = 3e-7;
  ResultRow b = a;
  b.form = "softmax/full";
  b.family = "softmax";
  b.status = "oom";
  b.note = "inputs need 1 bytes, 0 free";
  b.set_axis("chunk", 0);
  {
    ResultFile file(path, {{"backend", "openmp"}, {"command_line", "bench sweep --seq 1k"}});
    file.append(a);
    file.append(b);
    for (const char* precision : {"double", "tf32", "bf16"}) {
      ResultRow c = b;
      c.precision = precision;
      file.append(c);
    }
  }
  const auto rows = ResultFile::read(path);
  REQUIRE(rows.size() == 5);
  CHECK(rows[0].precision == "float");
  CHECK(rows[2].precision == "double");
  CHECK(rows[3].precision == "tf32");
  CHECK(rows[4].precision == "bf16");
  CHECK(rows[0].form == "linear/chunk");
  // Read back in the order of the file's columns, swept_axes' order.
  CHECK(rows[0].axes == written);
  CHECK(rows[1].axis("chunk") == 0);
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

namespace {

std::string fresh_temp_path(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / "attn_results_resume";
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::filesystem::remove(path);
  return path.string();
}

ResultRow sample_row(const std::string& form, int seq, const std::string& status) {
  ResultRow r;
  r.form = form;
  r.family = form.substr(0, form.find('/'));
  r.backend = "openmp";
  r.precision = "float";
  r.status = status;
  r.axes = {{"batch", 1}, {"heads", 2}, {"dk", 16},  {"dv", 16},
            {"seq", seq}, {"slots", 0}, {"chunk", 0}};
  r.reps = 3;
  r.time_median_s = seq * 1e-6;
  r.peak_bytes = 1000u * seq;
  return r;
}

}  // namespace

TEST_CASE("a result file is resumed: rows kept, appended to, replaced in place",
          "[harness][hdf5][resume]") {
  const auto path = fresh_temp_path("resume.h5");
  {
    ResultFile file(path, {{"backend", "openmp"}, {"command_line", "first"}},
                    ResultFile::Mode::resume);
    CHECK_FALSE(file.resumed());  // nothing there: created
    file.append(sample_row("softmax/full", 64, "ok"));
    file.append(sample_row("softmax/full", 128, "error"));
  }
  {
    ResultFile file(path, {{"backend", "cuda"}, {"command_line", "second"}},
                    ResultFile::Mode::resume);
    REQUIRE(file.resumed());
    REQUIRE(file.rows().size() == 2);
    CHECK(file.rows()[1].status == "error");
    CHECK(file.attributes().at("command_line") == "first");  // a resumed file keeps its attributes
    CHECK(file.attributes().at("format") == attn::result_format);
    file.replace(1, sample_row("softmax/full", 128, "ok"));
    file.append(sample_row("softmax/full", 256, "timeout"));
    file.set_attribute("resumed", "a line\n");
  }
  const auto rows = ResultFile::read(path);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].axis("seq") == 64);
  CHECK(rows[1].axis("seq") == 128);
  CHECK(rows[1].status == "ok");
  CHECK(rows[2].status == "timeout");
  CHECK(rows[2].time_median_s == 256e-6);
  const auto attributes = ResultFile::read_attributes(path);
  CHECK(attributes.at("backend") == "openmp");
  CHECK(attributes.at("resumed") == "a line\n");

  {
    ResultFile fresh(path, {{"backend", "openmp"}}, ResultFile::Mode::fresh);
    CHECK_FALSE(fresh.resumed());
    CHECK(fresh.rows().empty());
  }  // closed: a file being written is locked against every other opening
  CHECK(ResultFile::read(path).empty());
}

TEST_CASE("text columns are variable-length strings: nothing is cut", "[harness][hdf5]") {
  const auto path = fresh_temp_path("long_text.h5");
  ResultRow row = sample_row("lion-s/chunk", 64, "error");
  row.note = "not run: " + std::string(300, 'n') +
             " \xc3\xa9";  // beyond the 160 bytes of fixed-length notes
  row.variant = "mask-convention=B unscaled " + std::string(100, 'v');
  row.revision = std::string(60, 'r') + "-dirty";
  { ResultFile(path, {}).append(row); }
  const auto rows = ResultFile::read(path);
  REQUIRE(rows.size() == 1);
  CHECK(rows[0].note == row.note);
  CHECK(rows[0].variant == row.variant);
  CHECK(rows[0].revision == row.revision);
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t points = H5Dopen2(file, "points", H5P_DEFAULT);
  const hid_t type = H5Dget_type(points);
  const hid_t note = H5Tget_member_type(type, unsigned(H5Tget_member_index(type, "note")));
  CHECK(H5Tis_variable_str(note) > 0);
  for (hid_t id : {note, type}) H5Tclose(id);
  H5Dclose(points);
  H5Fclose(file);
}

TEST_CASE("each row's samples are stored beside it, and replaced with it",
          "[harness][hdf5][samples]") {
  const auto path = fresh_temp_path("samples.h5");
  ResultRow a = sample_row("softmax/full", 64, "ok"), b = sample_row("softmax/full", 128, "oom");
  a.samples = {1e-3, 1.5e-3, 0.9e-3};
  a.time_stddev_s = 3e-4;
  a.iterations = 4;
  {
    ResultFile file(path, {{"backend", "openmp"}});
    file.append(a);
    file.append(b);  // no samples
  }
  {
    ResultFile file(path, {}, ResultFile::Mode::resume);
    REQUIRE(file.rows().size() == 2);
    CHECK(file.rows()[0].samples == a.samples);
    CHECK(file.rows()[1].samples.empty());
    b.status = "ok";
    b.samples = {2e-3, 2e-3, 2e-3, 2.5e-3};
    file.replace(1, b);
  }
  const auto rows = ResultFile::read(path);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].samples == a.samples);
  CHECK(rows[0].time_stddev_s == 3e-4);
  CHECK(rows[0].iterations == 4);
  CHECK(rows[1].samples == b.samples);
  // A v3 file has no samples: its rows read with none.
  for (const auto& r : ResultFile::read(fixtures + "/quick_openmp.h5")) {
    CHECK(r.samples.empty());
    CHECK(r.iterations == 0);
  }
}

TEST_CASE("v2 files are read (their shape columns the axes, no slots) but not appended to",
          "[harness][hdf5][resume]") {
  const std::string committed =
      fixtures + "/lion_fig3.h5";  // written by the v2 harness, no slots column
  REQUIRE(ResultFile::read_attributes(committed).at("format") == "attn-harness points v2");
  const auto rows = ResultFile::read(committed);
  REQUIRE(rows.size() == 27);
  CHECK(attn::axes_of(rows) ==
        std::vector<std::string>{"batch", "heads", "seq", "dk", "dv", "chunk"});
  int ok = 0, chunked = 0;
  for (const auto& r : rows) {
    CHECK(r.axis("slots") == 0);  // absent from the file
    CHECK(r.form.rfind("lion-d/", 0) == 0);
    CHECK(r.axis("batch") == 64);
    CHECK(r.axis("heads") == 6);
    CHECK(r.axis("dk") == 64);
    if (r.status == "ok") {
      ++ok;
      CHECK(r.time_median_s > 0);
      CHECK(r.peak_bytes > 0);
    }
    chunked += r.axis("chunk") == 64;
  }
  CHECK(ok > 0);
  CHECK(chunked > 0);
  CHECK(rows[0].axis("seq") == 197);

  const auto copy = fresh_temp_path("v2.h5");
  std::filesystem::copy_file(committed, copy);
  std::filesystem::permissions(copy, std::filesystem::perms::owner_write,
                               std::filesystem::perm_options::add);
  CHECK_THROWS_AS(ResultFile(copy, {}, ResultFile::Mode::resume), attn::IncompatibleResultFile);
  CHECK_THROWS_WITH(ResultFile(copy, {}, ResultFile::Mode::resume),
                    Catch::Contains("older result file") && Catch::Contains("v2"));
  CHECK(ResultFile::read(copy).size() == 27);  // left as it was
}

// Reading refuses rows bench would not have written (junk over a row): the
// files bench did write, every committed one (results and the tests' older
// fixtures), must all still read.
TEST_CASE("every committed result file reads", "[harness][hdf5]") {
  for (const std::string& folder : {committed_results, fixtures}) {
    INFO(folder);
    REQUIRE(std::filesystem::is_directory(folder));
    int files = 0;
    for (const auto& entry : std::filesystem::directory_iterator(folder)) {
      if (entry.path().extension() != ".h5") continue;
      INFO(entry.path().string());
      CHECK_NOTHROW(ResultFile::read(entry.path().string()));
      ++files;
    }
    CHECK(files > 0);
  }
}

TEST_CASE("a file that is not a result file is not resumed", "[harness][hdf5][resume][errors]") {
  const auto text = fresh_temp_path("text.h5");
  { std::ofstream(text) << "not hdf5\n"; }
  CHECK_THROWS_WITH(ResultFile(text, {}, ResultFile::Mode::resume),
                    Catch::Contains("not an HDF5 file"));
  CHECK_THROWS_WITH(ResultFile::read(text), Catch::Contains("not an HDF5 file"));
  CHECK_THROWS_WITH(ResultFile::read(fresh_temp_path("missing.h5")),
                    Catch::Contains("no such file"));

  const auto bare = fresh_temp_path("bare.h5");  // HDF5, but no format attribute
  const hid_t file = H5Fcreate(bare.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  REQUIRE(file >= 0);
  H5Fclose(file);
  CHECK_THROWS_WITH(ResultFile(bare, {}, ResultFile::Mode::resume),
                    Catch::Contains("not a bench result file"));
}

TEST_CASE("point keys: identity without the measurement", "[harness][resume]") {
  ResultRow a = sample_row("linear/chunk", 1024, "ok");
  a.set_axis("chunk", 64);
  ResultRow b = a;
  b.status = "error";
  b.time_median_s = 1;
  b.note = "x";
  b.peak_bytes = 7;
  CHECK(attn::key_of(a) == attn::key_of(b));
  for (auto change : std::vector<void (*)(ResultRow&)>{
           [](ResultRow& r) { r.set_axis("chunk", 32); },
           [](ResultRow& r) { r.set_axis("slots", 8); },
           [](ResultRow& r) { r.set_axis("pass", 2); },  // an axis the row did not have
           [](ResultRow& r) { r.variant = "unscaled"; },
           [](ResultRow& r) { r.precision = "double"; }, [](ResultRow& r) { r.precision = "tf32"; },
           [](ResultRow& r) { r.precision = "bf16"; }, [](ResultRow& r) { r.backend = "cuda"; },
           [](ResultRow& r) { r.set_axis("seq", 2048); },
           [](ResultRow& r) { r.set_axis("dv", 8); }}) {
    ResultRow c = a;
    change(c);
    CHECK_FALSE(attn::key_of(a) == attn::key_of(c));
    CHECK((attn::key_of(a) < attn::key_of(c) || attn::key_of(c) < attn::key_of(a)));
  }
  CHECK(attn::key_of(a).describe() ==
        "linear/chunk float openmp batch=1 heads=2 dk=16 dv=16 seq=1024 chunk=64");
  // A series over L: the key without seq; and the key on some axes only.
  ResultRow longer = a;
  longer.set_axis("seq", 4096);
  CHECK(attn::key_of(a).without("seq") == attn::key_of(longer).without("seq"));
  CHECK(attn::key_on(a, {"seq", "chunk"}).describe() ==
        "linear/chunk float openmp seq=1024 chunk=64");
  CHECK(attn::key_on(a, {"chunk"}) == attn::key_on(longer, {"chunk"}));
  // A row of an older file: its axes in the order of its columns, and no slots column (0: the
  // form has no slots) is the same point.
  ResultRow older = a;
  older.axes = {{"batch", 1}, {"heads", 2}, {"seq", 1024}, {"dk", 16}, {"dv", 16}, {"chunk", 64}};
  CHECK(attn::key_of(older) == attn::key_of(a));
}

TEST_CASE("a row's axis columns are the declared axes, in order", "[harness][hdf5][axes]") {
  std::vector<std::string> declared;
  for (const auto& axis : attn::swept_axes()) declared.push_back(axis.name);
  CHECK(attn::axis_columns() == declared);
  // The columns of a new file: the identity columns, one per declared axis, the measurements.
  const auto path = fresh_temp_path("axes.h5");
  { ResultFile(path, {}).append(sample_row("softmax/full", 64, "ok")); }
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t points = H5Dopen2(file, "points", H5P_DEFAULT);
  const hid_t type = H5Dget_type(points);
  const int variant = H5Tget_member_index(type, "variant");
  for (std::size_t i = 0; i < declared.size(); ++i) {
    INFO(declared[i]);
    CHECK(H5Tget_member_index(type, declared[i].c_str()) == variant + 1 + int(i));
  }
  CHECK(H5Tget_member_index(type, "reps") == variant + 1 + int(declared.size()));
  H5Tclose(type);
  H5Dclose(points);
  H5Fclose(file);
  CHECK(attn::axes_of(ResultFile::read(path)) == declared);
}
