// Uses the library as a downstream project would: typed views and a layout computation.
#include <memfmt/memfmt.hpp>

#include <cstdio>

#ifdef MEMFMT_CONSUMER_SAFETENSORS
#include <memfmt/io/safetensors.hpp>
#endif
#ifdef MEMFMT_CONSUMER_PRIORS_DIR
#include <memfmt/graph/priors.hpp>
#include <memfmt/io/priors_json.hpp>
#endif

int main() {
  memfmt::host_tensor<float, memfmt::nhwc> t({1, 3, 2, 2});
  t(0, 2, 1, 1) = 5.f;
  const auto expected = 1 * 0 + 2 + 1 * 6 + 1 * 3;  // c + h*W*C + w*C
  if (t.data()[expected] != 5.f || memfmt::layout<memfmt::nhwc>::packed({1, 3, 2, 2}).stride(1) != 1) {
    std::puts("consumer: wrong layout");
    return 1;
  }
#ifdef MEMFMT_CONSUMER_SAFETENSORS
  memfmt::graph::parameter_store store;
  store.insert<float>("w", {2}, {1.5f, -2.f});
  const auto back = memfmt::io::read_safetensors(memfmt::io::write_safetensors(store));
  if (back.at("w").values<float>() != std::vector<float>{1.5f, -2.f}) {
    std::puts("consumer: safetensors round trip differs");
    return 1;
  }
  std::puts("consumer: memfmt::safetensors ok");
#endif
#ifdef MEMFMT_CONSUMER_PRIORS_DIR
  // The installed table is the compiled-in default, row for row.
  const auto priors = memfmt::io::read_priors_file(MEMFMT_CONSUMER_PRIORS_DIR "/onednn_cpu.json");
  if (memfmt::io::priors_to_json(priors, "onednn_cpu") !=
      memfmt::io::priors_to_json(memfmt::graph::onednn_cpu_priors(), "onednn_cpu")) {
    std::puts("consumer: the installed onednn_cpu.json differs from graph::onednn_cpu_priors()");
    return 1;
  }
  std::puts("consumer: priors from " MEMFMT_CONSUMER_PRIORS_DIR " ok");
#endif
  std::printf("consumer: memfmt %d.%d.%d ok\n", MEMFMT_VERSION_MAJOR, MEMFMT_VERSION_MINOR, MEMFMT_VERSION_PATCH);
  return 0;
}
