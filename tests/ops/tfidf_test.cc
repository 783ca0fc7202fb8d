// TfIdfVectorizer beyond its node tests (which are all TF mode without
// weights): IDF and TFIDF with weights, permuted output indexes, skips with
// 1-, 2- and 3-grams, int32 and int64 tokens, checked against a reference
// written from the ONNX specification's text; and its refusals.

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "exec/run.h"
#include "pipeline.h"
#include "support/graph_builder.h"

namespace kiln::testing {
namespace {

namespace kp = kiln::planner;

struct Spec {
  std::string mode = "TF";
  int64_t min_gram = 1, max_gram = 2, max_skip = 0;
  std::vector<int64_t> counts, indexes, pool;
  std::vector<float> weights;
};

Attribute floats_attr(std::vector<float> v) {
  Attribute a;
  a.kind = Attribute::Kind::kFloats;
  a.floats = std::move(v);
  return a;
}

std::map<std::string, Attribute> attrs(const Spec& s) {
  std::map<std::string, Attribute> a = {{"mode", string_attr(s.mode)},
                                        {"min_gram_length", int_attr(s.min_gram)},
                                        {"max_gram_length", int_attr(s.max_gram)},
                                        {"max_skip_count", int_attr(s.max_skip)},
                                        {"ngram_counts", ints_attr(s.counts)},
                                        {"ngram_indexes", ints_attr(s.indexes)},
                                        {"pool_int64s", ints_attr(s.pool)}};
  if (!s.weights.empty()) a["weights"] = floats_attr(s.weights);
  return a;
}

// The specification's reading: every n-gram of length min..max taken with
// 0..max_skip items skipped between its members (a 1-gram once per
// position), counted per pool entry; TF gives the counts, IDF 1 for any
// count scaled by the entry's weight, TFIDF the count times the weight, at
// the entry's output index.
std::vector<float> reference(const Spec& s, const std::vector<int64_t>& row, int64_t outputs) {
  std::map<std::vector<int64_t>, std::vector<size_t>> entries;  // n-gram -> pool entries
  size_t entry = 0;
  for (size_t k = 0; k < s.counts.size(); ++k) {
    const size_t n = k + 1;
    const size_t end = k + 1 < s.counts.size() ? static_cast<size_t>(s.counts[k + 1]) : s.pool.size();
    for (size_t at = static_cast<size_t>(s.counts[k]); at < end; at += n, ++entry) {
      entries[std::vector<int64_t>(s.pool.begin() + static_cast<long>(at), s.pool.begin() + static_cast<long>(at + n))]
          .push_back(entry);
    }
  }
  std::vector<int64_t> count(entry, 0);
  const int64_t c = static_cast<int64_t>(row.size());
  for (int64_t n = s.min_gram; n <= s.max_gram; ++n) {
    for (int64_t skip = 0; skip <= (n == 1 ? 0 : s.max_skip); ++skip) {
      for (int64_t start = 0; start + (n - 1) * (skip + 1) < c; ++start) {
        std::vector<int64_t> gram;
        for (int64_t k = 0; k < n; ++k) gram.push_back(row[static_cast<size_t>(start + k * (skip + 1))]);
        auto it = entries.find(gram);
        if (it == entries.end()) continue;
        for (size_t e : it->second) ++count[e];
      }
    }
  }
  std::vector<float> out(static_cast<size_t>(outputs), 0.f);
  for (size_t e = 0; e < entry; ++e) {
    const float w = s.weights.empty() ? 1.f : s.weights[e];
    const float v = s.mode == "TF"    ? static_cast<float>(count[e])
                    : s.mode == "IDF" ? (count[e] > 0 ? w : 0.f)
                                      : static_cast<float>(count[e]) * w;
    out[static_cast<size_t>(s.indexes[e])] += v;
  }
  return out;
}

HostTensor tokens(DType dtype, const std::vector<int64_t>& values, std::vector<int64_t> shape) {
  HostTensor t(dtype, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::INT32) {
      t.data<int32_t>()[i] = static_cast<int32_t>(values[i]);
    } else {
      t.data<int64_t>()[i] = values[i];
    }
  }
  return t;
}

void check_against_reference(const Spec& s, DType dtype) {
  const std::vector<std::vector<int64_t>> rows = {{1, 2, 1, 3, 2, 1, 2, 2, 3, 1}, {3, 3, 1, 2, 9, 1, 2, 3, 1, 2}};
  int64_t outputs = 0;
  for (int64_t i : s.indexes) outputs = std::max(outputs, i + 1);
  GraphBuilder b;
  const int x = b.input("x", {2, 10}, dtype);
  b.output(b.node("TfIdfVectorizer", {x}, attrs(s)));
  std::vector<int64_t> flat = rows[0];
  flat.insert(flat.end(), rows[1].begin(), rows[1].end());
  const HostTensor y = kp::run_program(b.plan().bytes, {tokens(dtype, flat, {2, 10})}, kp::RunOptions{}).outputs[0];
  ASSERT_EQ(y.dtype, DType::FLOAT32);
  ASSERT_EQ(y.shape, (std::vector<int64_t>{2, outputs}));
  for (size_t r = 0; r < 2; ++r) {
    const std::vector<float> want = reference(s, rows[r], outputs);
    for (int64_t o = 0; o < outputs; ++o) {
      EXPECT_FLOAT_EQ(y.data<float>()[static_cast<int64_t>(r) * outputs + o], want[static_cast<size_t>(o)])
          << s.mode << " row " << r << " output " << o;
    }
  }
}

Spec uni_bi_tri(const std::string& mode) {
  Spec s;
  s.mode = mode;
  s.min_gram = 1;
  s.max_gram = 3;
  s.max_skip = 2;
  s.pool = {1, 2, 3,     // unigrams
            1, 2, 2, 1,  // bigrams
            1, 2, 3};    // a trigram
  s.counts = {0, 3, 7};
  s.indexes = {5, 0, 2, 1, 4, 3};  // permuted
  s.weights = {0.5f, 2.f, 0.25f, 3.f, 1.5f, 10.f};
  return s;
}

TEST(TfIdfVectorizer, TfIdfAndTfidfWithWeightsAndSkipsMatchTheReference) {
  for (const char* mode : {"TF", "IDF", "TFIDF"}) {
    check_against_reference(uni_bi_tri(mode), DType::INT64);
    check_against_reference(uni_bi_tri(mode), DType::INT32);
  }
}

TEST(TfIdfVectorizer, OnlyTheLengthsFromMinToMaxAreCounted) {
  Spec s = uni_bi_tri("TF");
  s.min_gram = 2;
  s.max_gram = 2;
  check_against_reference(s, DType::INT64);
}

TEST(TfIdfVectorizer, ReferenceAgreesWithAHandCount) {
  // Row {1, 2, 1, 3, 2, 1, 2, 2, 3, 1}, bigram (1, 2) with up to 2 skips:
  // positions (0,1), (2,4), (5,6), (5,7) -> 4.
  Spec s;
  s.min_gram = 2;
  s.max_gram = 2;
  s.max_skip = 2;
  s.pool = {1, 2};
  s.counts = {0, 0};
  s.indexes = {0};
  EXPECT_EQ(reference(s, {1, 2, 1, 3, 2, 1, 2, 2, 3, 1}, 1)[0], 4.f);
  check_against_reference(s, DType::INT32);
}

std::string plan_error(const Spec& s, const std::string& extra_attr = "") {
  GraphBuilder b;
  const int x = b.input("x", {10}, DType::INT64);
  std::map<std::string, Attribute> a = attrs(s);
  if (!extra_attr.empty()) {
    Attribute strings;
    strings.kind = Attribute::Kind::kStrings;
    strings.strings = {"a", "b"};
    a[extra_attr] = strings;
  }
  b.output(b.node("TfIdfVectorizer", {x}, a));
  b.graph().nodes.back().name = "tfidf";
  try {
    (void)b.plan();
  } catch (const kp::PlanError& e) {
    return e.what();
  }
  return "";
}

TEST(TfIdfVectorizer, RefusesStringPoolsAndMalformedTablesInOneLine) {
  Spec s = uni_bi_tri("TF");
  const std::string strings = plan_error(s, "pool_strings");
  EXPECT_NE(strings.find("pool_strings"), std::string::npos) << strings;
  Spec bad = s;
  bad.counts = {0, 4, 7};  // 3 items of bigrams
  const std::string counts = plan_error(bad);
  EXPECT_NE(counts.find("ngram_counts"), std::string::npos) << counts;
  bad = s;
  bad.indexes.pop_back();
  const std::string indexes = plan_error(bad);
  EXPECT_NE(indexes.find("ngram_indexes"), std::string::npos) << indexes;
  bad = s;
  bad.mode = "BM25";
  const std::string mode = plan_error(bad);
  EXPECT_NE(mode.find("mode"), std::string::npos) << mode;
  for (const std::string& e : {strings, counts, indexes, mode}) {
    EXPECT_NE(e.find("'tfidf'"), std::string::npos) << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

}  // namespace
}  // namespace kiln::testing
