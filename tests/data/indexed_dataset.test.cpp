// Tests for data/indexed_dataset: round trips, every dtype, merging, and Megatron-Core as reference.
#include "data/indexed_dataset.hpp"

#include <catch2/catch.hpp>
#include <fstream>

#include "data_test_util.hpp"

using namespace mactor::data;
namespace t = mactor::data::test;

namespace {

// docs -> sequences -> tokens
using doc_list = std::vector<std::vector<std::vector<std::int64_t>>>;

void write(const std::string& prefix, const doc_list& docs, dtype d) {
  indexed_dataset_builder b(bin_path(prefix), d);
  for (const auto& doc : docs) {
    for (const auto& seq : doc) b.add_item(seq);
    b.end_document();
  }
  b.finalize(idx_path(prefix));
}

const doc_list sample_docs = {{{1, 2, 3}, {4}}, {{5, 6, 7, 8, 9}}, {{}, {10, 11}}};

}  // namespace

TEST_CASE("a written dataset reads back with the same sequences and documents for every dtype") {
  auto dir = t::scratch_dir("idx_roundtrip");
  for (int code = 1; code <= 8; ++code) {
    auto d = *dtype_from_code(code);
    const std::string p = dir + "/ds" + std::to_string(code);
    write(p, sample_docs, d);
    indexed_dataset ds(p);
    CHECK(ds.token_dtype() == d);
    REQUIRE(ds.size() == 5);
    CHECK(ds.document_indices() == std::vector<std::int64_t>{0, 2, 3, 5});
    CHECK(ds.sequence_lengths() == std::vector<std::int32_t>{3, 1, 5, 0, 2});
    CHECK(ds.get(2) == std::vector<std::int64_t>{5, 6, 7, 8, 9});
    CHECK(ds.get(2, 1, 3) == std::vector<std::int64_t>{6, 7, 8});
    CHECK(ds.get(2, 3) == std::vector<std::int64_t>{8, 9});
    CHECK(ds.sequence_pointer(2) == static_cast<std::int64_t>(4 * dtype_size(d)));
    CHECK(std::filesystem::file_size(p + ".idx") == 34 + 12 * 5 + 8 * 4);
    CHECK(std::filesystem::file_size(p + ".bin") == 11 * dtype_size(d));
  }
}

TEST_CASE("add_document and add_index merge sequences, shifted documents and bin bytes") {
  auto dir = t::scratch_dir("idx_merge");
  write(dir + "/a", {{{1, 2}}, {{3}}}, dtype::uint16);
  write(dir + "/b", {{{4, 5, 6}, {7}}}, dtype::uint16);
  {
    indexed_dataset_builder b(dir + "/m.bin", dtype::uint16);
    const std::vector<std::int64_t> doc = {9, 8, 7};
    const std::vector<std::int32_t> lens = {1, 2};
    b.add_document(doc, lens);
    b.add_index(dir + "/a");
    b.add_index(dir + "/b");
    b.finalize(dir + "/m.idx");
  }
  indexed_dataset m(dir + "/m");
  CHECK(m.sequence_lengths() == std::vector<std::int32_t>{1, 2, 2, 1, 3, 1});
  CHECK(m.document_indices() == std::vector<std::int64_t>{0, 2, 3, 4, 6});
  CHECK(m.get(4) == std::vector<std::int64_t>{4, 5, 6});
  CHECK(m.get(1) == std::vector<std::int64_t>{8, 7});
  indexed_dataset_builder wrong(dir + "/w.bin", dtype::int32);
  CHECK_THROWS_WITH(wrong.add_index(dir + "/a"), Catch::Contains("a.idx") && Catch::Contains("dtype"));
}

TEST_CASE("a truncated or foreign index names the file and the byte offset") {
  auto dir = t::scratch_dir("idx_errors");
  write(dir + "/ok", sample_docs, dtype::int32);
  auto idx = t::slurp(dir + "/ok.idx");
  auto bin = t::slurp(dir + "/ok.bin");
  auto put = [&](const std::string& name, const std::string& i, const std::string& b) {
    std::ofstream(dir + "/" + name + ".idx", std::ios::binary) << i;
    std::ofstream(dir + "/" + name + ".bin", std::ios::binary) << b;
    return dir + "/" + name;
  };
  auto p = put("short", idx.substr(0, 20), bin);
  CHECK_THROWS_WITH(indexed_dataset(p), Catch::Contains("short.idx") && Catch::Contains("byte offset 20"));
  std::string foreign = idx;
  foreign[0] = 'X';
  p = put("foreign", foreign, bin);
  CHECK_THROWS_WITH(indexed_dataset(p), Catch::Contains("foreign.idx at byte offset 0") && Catch::Contains("magic"));
  std::string badtype = idx;
  badtype[17] = 9;
  p = put("badtype", badtype, bin);
  CHECK_THROWS_WITH(indexed_dataset(p), Catch::Contains("byte offset 17"));
  p = put("cut", idx.substr(0, idx.size() - 8), bin);
  CHECK_THROWS_AS(indexed_dataset(p), data_error);
  CHECK_THROWS_WITH(indexed_dataset(p), Catch::Contains("cut.idx"));
  p = put("shortbin", idx, bin.substr(0, bin.size() - 3));
  CHECK_THROWS_WITH(indexed_dataset(p), Catch::Contains("shortbin.bin") && Catch::Contains("byte offset " + std::to_string(bin.size() - 3)));
  CHECK_THROWS_WITH(indexed_dataset(dir + "/missing"), Catch::Contains("missing.idx"));
}

TEST_CASE("optimal_dtype is uint16 below 65500 tokens and int32 otherwise") {
  CHECK(optimal_dtype(50257) == dtype::uint16);
  CHECK(optimal_dtype(65499) == dtype::uint16);
  CHECK(optimal_dtype(65500) == dtype::int32);
  CHECK(optimal_dtype(std::nullopt) == dtype::int32);
}

TEST_CASE("files written by Megatron-Core read back with ours and ours read back with Megatron-Core") {
  auto dir = t::scratch_dir("idx_megatron");
  // Megatron writes (item-wise, whole documents, and a merge), we read.
  const std::vector<int> codes = {1, 3, 4, 5, 8};
  nlohmann::json docs = {{{1, 2, 3}, {4}}, {{5, 6, 7, 8, 9}}, {{10, 11}}};
  nlohmann::json batch = nlohmann::json::array();
  for (int code : codes) {
    const std::string p = dir + "/mc" + std::to_string(code);
    batch.push_back({"write", {{"prefix", p + "_part"}, {"dtype", code}, {"docs", docs}}});
    batch.push_back({"write", {{"prefix", p}, {"dtype", code}, {"docs", docs}, {"whole_documents", true},
                               {"merge", {p + "_part"}}}});
  }
  t::megatron_reference("batch", batch, dir);
  for (int code : codes) {
    const std::string p = dir + "/mc" + std::to_string(code);
    indexed_dataset ds(p);
    CHECK(static_cast<int>(ds.token_dtype()) == code);
    CHECK(ds.document_indices() == std::vector<std::int64_t>{0, 2, 3, 4, 6, 7, 8});
    CHECK(ds.get(2) == std::vector<std::int64_t>{5, 6, 7, 8, 9});
    CHECK(ds.get(7) == std::vector<std::int64_t>{10, 11});
    // Our builder given the same input yields identical bytes.
    {
      indexed_dataset_builder b(dir + "/ours.bin", *dtype_from_code(code));
      b.add_document(std::vector<std::int64_t>{1, 2, 3, 4}, std::vector<std::int32_t>{3, 1});
      b.add_document(std::vector<std::int64_t>{5, 6, 7, 8, 9}, std::vector<std::int32_t>{5});
      b.add_document(std::vector<std::int64_t>{10, 11}, std::vector<std::int32_t>{2});
      b.add_index(p + "_part");
      b.finalize(dir + "/ours.idx");
    }
    CHECK(t::slurp(dir + "/ours.idx") == t::slurp(p + ".idx"));
    CHECK(t::slurp(dir + "/ours.bin") == t::slurp(p + ".bin"));
  }
  // We write, Megatron reads.
  write(dir + "/ours2", {{{7, 300, 65000}, {1}}, {{2, 3, 4, 5}}}, dtype::uint16);
  auto r = t::megatron_reference("read", {{"prefix", dir + "/ours2"}}, dir);
  CHECK(r["dtype"] == 8);
  CHECK(r["sequence_lengths"] == nlohmann::json({3, 1, 4}));
  CHECK(r["document_indices"] == nlohmann::json({0, 2, 3}));
  CHECK(r["sequences"] == nlohmann::json({{7, 300, 65000}, {1}, {2, 3, 4, 5}}));
  CHECK(r["pieces"] == nlohmann::json({{300, 65000}, {3, 4}}));
}
