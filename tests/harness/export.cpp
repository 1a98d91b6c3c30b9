// bench export and bench list --format json: JSON strings escaped, CSV and
// markdown cells quoted, every column of the HDF5 table in its order.
#include "export.hpp"

#include <hdf5.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>

#include "axes.hpp"
#include "text.hpp"

namespace {

using namespace attn;

TEST_CASE("json_string escapes quotes, backslashes and control characters, keeps UTF-8",
          "[harness][export]") {
  CHECK(json_string("") == R"("")");
  CHECK(json_string("plain text") == R"("plain text")");
  CHECK(json_string(R"(say "hi")") == R"("say \"hi\"")");
  CHECK(json_string(R"(C:\path\)") == R"("C:\\path\\")");
  CHECK(json_string("a\nb\tc\rd\be\ff") == R"("a\nb\tc\rd\be\ff")");
  CHECK(json_string(std::string("nul\0end", 7)) == R"("nul\u0000end")");
  CHECK(json_string("\x01\x1f\x7f") == R"("\u0001\u001f\u007f")");
  CHECK(json_string("\xc2\x85") == R"("\u0085")");  // C1 control character NEL
  CHECK(json_string("L\xc3\xa9vy \xce\xbb \xf0\x9f\x98\x80") ==
        "\"L\xc3\xa9vy \xce\xbb \xf0\x9f\x98\x80\"");
  // A byte of no UTF-8 character (a note cut mid-character, Latin-1): the text \xNN, as bench
  // prints it.
  CHECK(json_string("caf\xe9") == R"("caf\\xe9")");
  CHECK(json_string("\xe2\x82") == R"("\\xe2\\x82")");
}

ResultRow tricky_row() {
  ResultRow r;
  r.form = "softmax/full";
  r.family = "softmax";
  r.backend = "openmp";
  r.precision = "float";
  r.status = "error";
  r.note = R"(a "quoted", piped | note)";
  r.axes = {{"batch", 1}, {"heads", 2}, {"seq", 64}, {"dk", 16}, {"dv", 16}, {"pass", 2}};
  r.reps = 3;
  r.time_median_s = 1.5e-3;
  r.peak_bytes = 123456789012ull;
  r.rel_l2_err = std::nan("");
  r.max_abs_err = HUGE_VAL;
  r.revision = "abc-dirty";
  r.kernel = "portable";
  r.kernel_reason = "chunk 96, not 64";
  return r;
}

TEST_CASE("export_rows writes a header and every column, cells escaped for the format",
          "[harness][export]") {
  const std::vector<ResultRow> rows{tricky_row()};
  const std::string csv = export_rows(rows, ExportFormat::csv);
  // The axis columns are the rows' own, whatever they are.
  CHECK(csv.rfind("form,family,backend,precision,status,note,variant,batch,heads,seq,dk,dv,pass,"
                  "reps,",
                  0) == 0);
  CHECK(csv.find(R"(,error,"a ""quoted"", piped | note",,1,2,64,16,16,2,3,)") != std::string::npos);
  CHECK(csv.find(",123456789012,") != std::string::npos);
  CHECK(csv.find(",inf,nan,abc-dirty,0,0,0,portable,\"chunk 96, not 64\"\n") != std::string::npos);
  const std::string markdown = export_rows(rows, ExportFormat::markdown);
  CHECK(markdown.rfind("| form | family | ", 0) == 0);
  CHECK(markdown.find("\n| --- | --- | ") != std::string::npos);
  CHECK(markdown.find(R"(| a "quoted", piped \| note |)") != std::string::npos);
  const std::string json = export_rows(rows, ExportFormat::json);
  CHECK(json.rfind("[\n  {\"form\": \"softmax/full\", ", 0) == 0);
  CHECK(json.find(R"("note": "a \"quoted\", piped | note")") != std::string::npos);
  CHECK(
      json.find(
          R"("max_abs_err": null, "rel_l2_err": null, "revision": "abc-dirty", "time_stddev_s": 0, )"
          R"("iterations": 0, "err_rows": 0, "kernel": "portable", "kernel_reason": "chunk 96, not 64"})") !=
      std::string::npos);
  CHECK(json.find("\"time_median_s\": 0.0015,") != std::string::npos);
  CHECK(export_rows({}, ExportFormat::json) == "[]\n");
  CHECK_THROWS_WITH(export_format("xml"), "--format 'xml': expected csv, json or markdown");
}

TEST_CASE("export_columns are the HDF5 table's columns, in order", "[harness][export]") {
  const auto path = (std::filesystem::temp_directory_path() / "attn_export_columns.h5").string();
  std::filesystem::remove(path);
  { ResultFile file(path, {}); }
  const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t dataset = H5Dopen2(file, "points", H5P_DEFAULT);
  const hid_t type = H5Dget_type(dataset);
  std::vector<std::string> names;
  for (int i = 0; i < H5Tget_nmembers(type); ++i) {
    char* name = H5Tget_member_name(type, unsigned(i));
    names.push_back(name);
    H5free_memory(name);
  }
  H5Tclose(type);
  H5Dclose(dataset);
  H5Fclose(file);
  std::filesystem::remove(path);
  CHECK(export_columns(axis_columns()) == names);
}

}  // namespace
