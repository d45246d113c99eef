// mactor's torch.save files against PyPI torch (torch_file_reference.py): a file mactor writes is
// read by torch.load, and one torch.save wrote (views, strides, bf16/fp16/fp64, a Namespace, numpy
// RNG state) is read by mactor's zip reader and unpickler. Also the zip layer's own checks.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "checkpoint/checkpoint_error.hpp"
#include "checkpoint/torch_file.hpp"
#include "checkpoint/zip_archive.hpp"
#include "tensor/half_float.hpp"

namespace fs = std::filesystem;
using namespace mactor::checkpoint;

namespace {

std::string python() {
  const fs::path venv = fs::path(MACTOR_SOURCE_DIR) / ".venv/bin/python";
  return fs::exists(venv) ? venv.string() : "/usr/bin/python3";
}

std::string reference() { return std::string(MACTOR_SOURCE_DIR) + "/tests/checkpoint/torch_file_reference.py"; }

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::path(MACTOR_BINARY_DIR) / "tests/checkpoint/torch_file" / (name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::shared_ptr<torch_tensor> tensor_of(const char* dtype, std::vector<std::int64_t> shape, const void* data, std::size_t bytes) {
  auto t = std::make_shared<torch_tensor>();
  t->dtype = dtype_by_name(dtype);
  t->shape = std::move(shape);
  t->bytes.assign(static_cast<const char*>(data), bytes);
  return t;
}

std::vector<float> floats(const pickle_value* v) {
  REQUIRE(v);
  REQUIRE(v->k == pickle_value::kind::tensor);
  const auto& t = *v->tensor;
  std::vector<float> out(t.bytes.size() / t.dtype->item_size);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const char* p = t.bytes.data() + i * t.dtype->item_size;
    std::uint16_t h;
    double d;
    if (std::string(t.dtype->name) == "float32") std::memcpy(&out[i], p, 4);
    else if (std::string(t.dtype->name) == "float64") std::memcpy(&d, p, 8), out[i] = float(d);
    else if (std::string(t.dtype->name) == "bfloat16") std::memcpy(&h, p, 2), out[i] = mactor::tensor::to_float(mactor::tensor::bfloat16{h});
    else std::memcpy(&h, p, 2), out[i] = mactor::tensor::to_float(mactor::tensor::float16{h});
  }
  return out;
}

}  // namespace

TEST_CASE("torch.load reads the file mactor writes") {
  const auto dir = scratch("write");
  auto root = pickle_value::dict();
  std::vector<float> f32(12);
  for (int i = 0; i < 12; ++i) f32[i] = i * 0.25f - 1.0f;
  root.set("f32", pickle_value::of_tensor(tensor_of("float32", {3, 4}, f32.data(), 48)));
  std::vector<std::uint16_t> bf(5);
  for (int i = 0; i < 5; ++i) bf[i] = mactor::tensor::to_bfloat16(static_cast<float>(i * 1.37 + 0.1)).bits;
  root.set("bf16", pickle_value::of_tensor(tensor_of("bfloat16", {5}, bf.data(), 10)));
  const std::int64_t ints[] = {-3, 0, std::int64_t(1) << 40};
  root.set("i64", pickle_value::of_tensor(tensor_of("int64", {3}, ints, sizeof ints)));
  auto ns = pickle_value::object("argparse.Namespace");
  ns.set("a", pickle_value::integer(1));
  ns.set("b", pickle_value::text("x"));
  ns.set("c", pickle_value::real(2.5));
  ns.set("d", pickle_value::none());
  ns.set("e", pickle_value::boolean(true));
  ns.set("f", pickle_value::list({pickle_value::integer(1), pickle_value::integer(2)}));
  ns.set("big", pickle_value::integer(std::int64_t(1) << 40));
  ns.set("neg", pickle_value::integer(-7));
  ns.set("neg_big", pickle_value::integer(-(std::int64_t(1) << 40)));
  root.set("ns", ns);
  auto od = pickle_value::dict(true);
  od.set("k1", pickle_value::integer(1));
  od.set("k2", pickle_value::text("v"));
  root.set("od", od);
  pickle_value by;
  by.k = pickle_value::kind::bytes;
  by.s = std::string("\x00\xff\x80" "a", 4);
  root.set("by", by);
  root.set("tu", pickle_value::tuple({pickle_value::integer(1), pickle_value::text("two"), pickle_value::real(3.0)}));
  root.set(7, pickle_value::text("int key"));
  root.set("pi", pickle_value::real(M_PI));
  root.set("empty", pickle_value::dict());
  root.set("empty_list", pickle_value::list());
  root.set("empty_tuple", pickle_value::tuple());
  const auto file = dir / "mactor.pt";
  {
    std::ofstream out(file, std::ios::binary);
    const auto bytes = torch_save_bytes(root);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  REQUIRE(std::system((python() + " " + reference() + " check " + file.string()).c_str()) == 0);

  SECTION("and mactor reads its own file back") {
    const auto back = torch_load(file);
    CHECK(floats(back.find("f32")) == f32);
    CHECK(back.find("ns")->find("neg_big")->i == -(std::int64_t(1) << 40));
    CHECK(back.find("by")->s == by.s);
    CHECK(back.find(7)->s == "int key");
    CHECK(back.find("pi")->d == M_PI);
  }
}

TEST_CASE("mactor reads the file torch.save writes") {
  const auto dir = scratch("read");
  const auto file = dir / "torch.pt";
  REQUIRE(std::system((python() + " " + reference() + " write " + file.string()).c_str()) == 0);
  const auto sd = torch_load(file);
  CHECK(sd.ordered);
  std::vector<float> w(12), wt(12), row(4), bf(6), half(4);
  for (int i = 0; i < 12; ++i) w[i] = i * 0.5f;
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < 3; ++c) wt[r * 3 + c] = w[c * 4 + r];
  for (int i = 0; i < 4; ++i) row[i] = w[4 + i], half[i] = i - 1.5f;
  for (int i = 0; i < 6; ++i) bf[i] = mactor::tensor::to_float(mactor::tensor::to_bfloat16(i / 3.0f));
  CHECK(floats(sd.find("w")) == w);
  CHECK(sd.find("wt")->tensor->shape == std::vector<std::int64_t>{4, 3});
  CHECK(floats(sd.find("wt")) == wt);
  CHECK(floats(sd.find("row")) == row);
  CHECK(floats(sd.find("bf")) == bf);
  CHECK(std::string(sd.find("bf")->tensor->dtype->name) == "bfloat16");
  CHECK(floats(sd.find("half")) == half);
  CHECK(floats(sd.find("f64")) == std::vector<float>{0.1f, -2.0f});
  const auto* args = sd.find("args");
  REQUIRE(args);
  CHECK(args->s == "argparse.Namespace");
  CHECK(args->find("tensor_model_parallel_size")->i == 2);
  CHECK(args->find("lr")->d == 0.5);
  CHECK(args->find("name")->s == "x");
  CHECK(args->find("flag")->b == false);
  CHECK(args->find("nothing")->k == pickle_value::kind::none);
  CHECK(args->find("layers")->items.size() == 3);
  const auto* opt = sd.find("optimizer");
  CHECK(floats(opt->find("state")->find(std::int64_t{0})->find("step")) == std::vector<float>{3.0f});
  CHECK(opt->find("state")->find(std::int64_t{1})->find("step")->i == 4);
  CHECK(sd.find("checkpoint_version")->d == 3.0);
  CHECK(sd.find("by")->s == std::string("\x01\xfe", 2));
  // numpy's RNG state comes back as an opaque value, not an error.
  CHECK(sd.find("rng_state")->items.size() == 1);
}

TEST_CASE("zip archive: members round-trip, damage is named") {
  const std::string a = "hello", b(100000, 'x');
  const auto bytes = write_zip({{"archive/a", a}, {"archive/b", b}});
  zip_reader z(bytes, "test.zip");
  CHECK(z.member("archive/a") == a);
  CHECK(z.member("archive/b") == b);
  CHECK(reinterpret_cast<std::uintptr_t>(z.member("archive/b").data()) % 64 == reinterpret_cast<std::uintptr_t>(z.member("archive/a").data()) % 64);
  CHECK_THROWS_WITH(z.member("archive/c"), Catch::Contains("has no member archive/c"));
  std::string damaged = bytes;
  damaged[damaged.find("hello")] = 'j';
  zip_reader zd(damaged, "damaged.zip");
  CHECK_THROWS_WITH(zd.member("archive/a"), Catch::Contains("fails its CRC-32"));
  CHECK_THROWS_AS(zip_reader(std::string("not a zip file at all, no"), "x"), checkpoint_error);
  CHECK_THROWS_WITH(zip_reader(bytes.substr(0, bytes.size() / 2), "half.zip"), Catch::Contains("half.zip"));
}
