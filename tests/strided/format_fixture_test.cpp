// Every case recorded from PyTorch 1.13 by gen_format_fixtures.py, checked against
// strided/classify.hpp and strided/format_requests.hpp: flags, suggested format, and the results
// of .to / .contiguous / empty_like / clone for the four format requests.
#include <gtest/gtest.h>

#include <cstddef>
#include <iostream>
#include <string>
#include <vector>

#include "format_fixtures.hpp"
#include "memfmt/strided/classify.hpp"
#include "memfmt/strided/format_requests.hpp"

#ifndef MEMFMT_STRIDED_FIXTURE_DIR
#error "MEMFMT_STRIDED_FIXTURE_DIR must name tests/strided/fixtures"
#endif

namespace {

using memfmt_test::outcome;

template <class F>
outcome observe(F&& request) {
  outcome o;
  try {
    memfmt::format_result r = request();
    o.kind = r.alias ? outcome::alias : outcome::copy;
    if (!r.alias) o.strides = r.strides;
  } catch (const memfmt::error& e) {
    o.kind = outcome::error;
    o.message = e.what();
  }
  return o;
}

outcome observe_empty_like(const memfmt::strided_desc& t, memfmt::memory_format f) {
  return observe([&] { return memfmt::format_result{false, t.sizes, memfmt::empty_like_strides(t, f)}; });
}

struct tally {
  std::size_t requests_checked = 0, requests_unobserved = 0;
};

// Every disagreement of one case, one line each (empty when memfmt matches PyTorch).
std::vector<std::string> mismatches(const memfmt_test::format_case& c, tally& n) {
  std::vector<std::string> out;
  auto check_flag = [&](const char* what, bool ours, bool torch) {
    if (ours != torch)
      out.push_back(std::string(what) + ": memfmt " + (ours ? "true" : "false") + ", PyTorch " +
                    (torch ? "true" : "false"));
  };
  using memfmt::memory_format;
  const auto& t = c.t;
  check_flag("is_contiguous", memfmt::is_contiguous(t), c.is_contiguous);
  check_flag("is_contiguous(channels_last)", memfmt::is_contiguous(t, memory_format::channels_last),
             c.is_contiguous_channels_last);
  check_flag("is_contiguous(channels_last_3d)", memfmt::is_contiguous(t, memory_format::channels_last_3d),
             c.is_contiguous_channels_last_3d);
  check_flag("is_contiguous(preserve)", memfmt::is_contiguous(t, memory_format::preserve), c.is_contiguous);
  check_flag("is_non_overlapping_and_dense", memfmt::is_non_overlapping_and_dense(t), c.non_overlapping_and_dense);
  // For ranks 4 and 5 the strides-like flags are exactly what suggest_memory_format reads.
  check_flag("is_channels_last_strides_like", memfmt::is_channels_last_strides_like(t),
             c.suggest == memory_format::channels_last);
  check_flag("is_channels_last_3d_strides_like", memfmt::is_channels_last_3d_strides_like(t),
             c.suggest == memory_format::channels_last_3d);
  const auto suggested = memfmt::suggest_memory_format(t);
  if (suggested != c.suggest)
    out.push_back("suggest_memory_format: memfmt " + std::string(to_string(suggested)) + ", PyTorch " +
                  std::string(to_string(c.suggest)));
  for (std::size_t i = 0; i < 4; ++i) {
    const auto f = memfmt::all_memory_formats[i];
    const std::string name(to_string(f));
    auto check = [&](const std::string& what, const outcome& ours, const outcome& torch) {
      if (torch.kind == outcome::unobserved) {
        ++n.requests_unobserved;
        return;
      }
      ++n.requests_checked;
      if (!(ours == torch)) out.push_back(what + ": memfmt " + ours.str() + ", PyTorch " + torch.str());
    };
    check(".to(" + name + ")", observe([&] { return memfmt::to_format(t, f); }), c.to[i]);
    check(".contiguous(" + name + ")", observe([&] { return memfmt::contiguous_format(t, f); }), c.contiguous[i]);
    check("empty_like(" + name + ")", observe_empty_like(t, f), c.empty_like[i]);
    check("clone(" + name + ")", observe_empty_like(t, f), c.clone[i]);
  }
  return out;
}

class format_fixture : public ::testing::TestWithParam<const char*> {};

TEST_P(format_fixture, every_case_matches_pytorch) {
  const auto cases = memfmt_test::load_format_cases(MEMFMT_STRIDED_FIXTURE_DIR, GetParam());
  ASSERT_GT(cases.size(), 1000u) << "fixture " << GetParam() << " is unexpectedly small";
  std::size_t failed = 0, shown = 0;
  tally n;
  for (const auto& c : cases) {
    const auto bad = mismatches(c, n);
    if (bad.empty()) continue;
    ++failed;
    if (shown++ < 8) {
      std::string detail;
      for (const auto& b : bad) detail += "\n    " + b;
      ADD_FAILURE() << c.origin << ": " << memfmt_test::describe(c.t) << detail;
    }
  }
  std::cout << "[ fixture  ] " << GetParam() << ": " << cases.size() << " cases checked (" << n.requests_checked
            << " request results compared, " << n.requests_unobserved << " not observed by the generator), " << failed
            << " mismatched\n";
  EXPECT_EQ(failed, 0u);
}

INSTANTIATE_TEST_SUITE_P(pytorch_1_13, format_fixture, ::testing::ValuesIn(memfmt_test::format_fixture_files),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           name = name.substr(0, name.find('.'));
                           return name;
                         });

}  // namespace
