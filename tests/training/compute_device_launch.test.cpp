// pretrain_gpt's MACTOR_DEVICE: a value it does not know, and a GPU run where no GPU can be used,
// are bad input (exit status 2) named before training starts. A plain pretrain_gpt loads the CUDA
// backend module only when a run asks for the GPU (tensor/device_backend.hpp): with CUDA in the
// build, the module must load and resolve every symbol from the program for its own error (no
// device) to be the one reported. CUDA_VISIBLE_DEVICES="" hides any GPU, so the case is the same
// on a machine with one.
#include <catch2/catch.hpp>

#include <string>

#include "tests/training/launch_support.hpp"

using namespace mactor::test;

namespace {

const std::string tiny =
    "--mock-data --num-layers 1 --hidden-size 32 --num-attention-heads 4 --seq-length 16 "
    "--max-position-embeddings 16 --micro-batch-size 1 --global-batch-size 1 --train-iters 1 --lr 1e-3 "
    "--tokenizer-type NullTokenizer --vocab-size 512 --eval-iters 0";

// pretrain_gpt under the environment `env`.
std::string with_env(const std::string& env) { return env + " " + bin_dir() + "/pretrain_gpt " + tiny; }

}  // namespace

TEST_CASE("pretrain_gpt with an unknown MACTOR_DEVICE exits 2 naming the variable and its values") {
  expect_user_error(with_env("MACTOR_DEVICE=tpu"), {"MACTOR_DEVICE=tpu", "cpu", "cuda"});
}

TEST_CASE("pretrain_gpt on a device refuses the flags with no device path yet with exit status 2 naming each") {
  // The pseudo-device build has a device: the flags are what is refused.
  expect_user_error(bin_dir() + "/pretrain_gpt_on_pseudo_device " + tiny +
                        " --bf16 --fp8-format e4m3 --fp8-param-gather --use-distributed-optimizer "
                        "--optimizer-cpu-offload --use-precision-aware-optimizer",
                    {"not built on a GPU yet", "--fp8-param-gather", "--optimizer-cpu-offload", "MACTOR_DEVICE=cpu"});
  // fp8 Adam moments too: under the launcher, both ranks say so.
  expect_user_error(mactor_bin() + " -np 2 --oversubscribe " + bin_dir() + "/pretrain_gpt_on_pseudo_device " + tiny +
                        " --global-batch-size 2 --bf16 --use-distributed-optimizer --use-precision-aware-optimizer --exp-avg-dtype fp8 "
                        "--exp-avg-sq-dtype fp8",
                    {"--exp-avg-dtype/--exp-avg-sq-dtype fp8/fp8", "fp8 Adam moments live on the host"});
}

TEST_CASE("pretrain_gpt with MACTOR_DEVICE=cuda and no usable GPU exits 2 saying why") {
#if MACTOR_TEST_HAVE_CUDA
  // The backend module loaded and ran: its own check names the missing device.
  expect_user_error(with_env("MACTOR_DEVICE=cuda CUDA_VISIBLE_DEVICES="), {"cuda:0", "no CUDA device can be used", "MACTOR_DEVICE=cpu"});
#else
  expect_user_error(with_env("MACTOR_DEVICE=cuda"), {"cuda:0", "cannot load the CUDA backend", "MACTOR_DEVICE=cpu"});
#endif
}
